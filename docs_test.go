package watchtree

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureReferencesExist keeps docs/architecture.md true to the code: every repository
// path it names in backticks exists, every function named after a file in "Where each guarantee
// is enforced" is declared in that file, and every name in "Message flow at a glance" is a
// protobuf message type of messages/ (public) or internal/wire (the tree's private traffic).
func TestArchitectureReferencesExist(t *testing.T) {
	raw, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)

	paths := regexp.MustCompile("`((?:actors|store|internal|test|cmd|messages|proto|observe|console|health|metrics|policy|examples|docs)/[A-Za-z0-9_./-]*|[a-z_]+\\.(?:go|proto|md))`")
	goIdent := regexp.MustCompile(`\.[A-Z]`) // metrics/prometheus.Metrics names a Go identifier
	files := repoFiles(t)
	checked := 0
	for _, m := range paths.FindAllStringSubmatch(doc, -1) {
		p := strings.TrimSuffix(m[1], "/")
		if strings.ContainsAny(p, "*<>") || goIdent.MatchString(p) {
			continue
		}
		checked++
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if !strings.Contains(p, "/") && files[p] { // a file named in its package's paragraph
			continue
		}
		t.Errorf("docs/architecture.md names %s, which does not exist", m[1])
	}
	if checked < 20 {
		t.Fatalf("only %d paths found: the pattern no longer matches the document", checked)
	}

	guarantees := section(t, doc, "## Where each guarantee is enforced")
	ref := regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)`: ((?:`\\w+`(?:, )?)+)")
	name := regexp.MustCompile("`(\\w+)`")
	funcs := 0
	for _, m := range ref.FindAllStringSubmatch(guarantees, -1) {
		src, err := os.ReadFile(m[1])
		if err != nil {
			t.Errorf("guarantee table: %v", err)
			continue
		}
		for _, n := range name.FindAllStringSubmatch(m[2], -1) {
			decl := regexp.MustCompile(`(?m)^func (\([^)]*\) )?` + n[1] + `[\[(]`)
			if !decl.Match(src) {
				t.Errorf("guarantee table: %s declares no function %s", m[1], n[1])
			}
			funcs++
		}
	}
	if funcs < 30 {
		t.Fatalf("only %d functions found in the guarantee table", funcs)
	}

	types := map[string]bool{}
	pbs, _ := filepath.Glob("messages/*.pb.go")
	internal, _ := filepath.Glob("internal/wire/*.pb.go")
	pbs = append(pbs, internal...)
	decl := regexp.MustCompile(`(?m)^type (\w+) struct`)
	for _, f := range pbs {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			types[m[1]] = true
		}
	}
	flow := section(t, doc, "### Message flow at a glance")
	names := 0
	for _, line := range strings.Split(flow, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[2], -1) {
			if !types[m[1]] {
				t.Errorf("message flow names %s, which is not a message type of messages/ or internal/wire", m[1])
			}
			names++
		}
	}
	if names < 40 {
		t.Fatalf("only %d message names found in the message flow table", names)
	}
}

// repoFiles returns the base names of the repository's files.
func repoFiles(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && p != ".") {
			return filepath.SkipDir
		}
		names[d.Name()] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// section returns the text from heading to the next heading of the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/architecture.md has no %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	level := strings.Count(strings.Fields(heading)[0], "#")
	for j := 0; j < len(rest); {
		k := strings.Index(rest[j:], "\n#")
		if k < 0 {
			break
		}
		hdr := rest[j+k+1:]
		n := len(hdr) - len(strings.TrimLeft(hdr, "#"))
		if n <= level {
			return rest[:j+k]
		}
		j += k + 2
	}
	return rest
}
