package watchtree

import (
	"go/doc/comment"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPackageDocsRender parses every package comment of the repository (every module's) as
// go doc renders it and fails when code is rendered as prose: a paragraph or list item holding
// Go code (":=") instead of a code block, which pkg.go.dev shows as one run-on line. It also
// keeps source file names out of the root package's documentation, which describes the API,
// not the layout of its files (they move; docs/architecture.md maps them).
func TestPackageDocsRender(t *testing.T) {
	code := regexp.MustCompile(`(?m)^\w+(, \w+)* :?= `) // a line that starts with an assignment
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "node_modules" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil || f.Doc == nil {
			return err
		}
		checked++
		var p comment.Parser
		doc := p.Parse(f.Doc.Text())
		var prose func(blocks []comment.Block)
		prose = func(blocks []comment.Block) {
			for _, b := range blocks {
				switch b := b.(type) {
				case *comment.Paragraph:
					if s := text(b.Text); code.MatchString(s) {
						t.Errorf("%s: the package doc renders Go code as prose (indent it with a tab, outside any list): %q", path, s)
					}
				case *comment.List:
					for _, it := range b.Items {
						prose(it.Content)
					}
				}
			}
		}
		prose(doc.Content)
		if path == "doc.go" {
			if m := regexp.MustCompile(`\b\w+\.go\b`).FindAllString(f.Doc.Text(), -1); len(m) > 0 {
				t.Errorf("doc.go: the package doc lists source files %v", m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 30 {
		t.Fatalf("only %d package comments found", checked)
	}
}

// text is the plain text of a paragraph.
func text(ts []comment.Text) string {
	var b strings.Builder
	for _, x := range ts {
		switch x := x.(type) {
		case comment.Plain:
			b.WriteString(string(x))
		case comment.Italic:
			b.WriteString(string(x))
		case *comment.Link:
			b.WriteString(text(x.Text))
		case *comment.DocLink:
			b.WriteString(text(x.Text))
		}
	}
	return b.String()
}
