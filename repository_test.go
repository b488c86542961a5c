package watchtree

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRepositoryStandsAlone: no source file or document of the repository cites notes that live
// outside it (a design document's sections, a shared folder next to the checkout, reference
// notes): a reader of the repository cannot follow such a citation, so the text must say what is
// needed in the project's own words.
func TestRepositoryStandsAlone(t *testing.T) {
	// Built from parts, so that this file does not cite what it looks for.
	outside := regexp.MustCompile(`design ` + `§|\.\./` + `shared|shared/` + `design|` + `reference/[a-z-]+\.` + `md`)
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// node_modules holds the npm packages of the client tests (git-ignored, not ours).
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".proto":
		default:
			return nil
		}
		if strings.HasSuffix(path, ".pb.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, outside the repository: %s", path, i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
