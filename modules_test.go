package watchtree

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestNoModuleImportsAnotherModulesInternals: a module of the repository (a directory with its
// own go.mod) imports no package under another module's internal/ directory. Go refuses an
// internal import only from outside the tree rooted at internal/'s parent, and every module
// here sits inside the root module's tree, so the compiler lets such an import through; but once
// the modules are tagged and fetched separately, the importer builds against whatever the other
// module's internals are at its required version, which that module never promised to keep.
// What an adapter needs goes through a public package instead.
func TestNoModuleImportsAnotherModulesInternals(t *testing.T) {
	mods, err := repoModules(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) < 5 {
		t.Fatalf("only %d modules found (%v): the walk is broken", len(mods), mods)
	}
	var bad []string
	for _, m := range mods {
		err := walkModule(m, mods, func(file string) error {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					return err
				}
				if owner := internalOwner(p, mods); owner != nil && owner.path != m.path {
					bad = append(bad, file+" (module "+m.path+") imports "+p+", internal to module "+owner.path)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// goModule is one module of the repository: its directory and module path.
type goModule struct{ dir, path string }

// repoModules returns the modules under root, the deepest first (so that the first module whose
// path prefixes an import path is the one that owns it).
func repoModules(root string) ([]goModule, error) {
	var mods []goModule
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		mp, err := modulePath(path)
		if err != nil {
			return err
		}
		mods = append(mods, goModule{dir: filepath.Dir(path), path: mp})
		return nil
	})
	sort.Slice(mods, func(i, j int) bool { return len(mods[i].path) > len(mods[j].path) })
	return mods, err
}

// skipDir: hidden directories, testdata (fixtures, never built) and node_modules (the JavaScript
// client tests' npm packages) hold no module of ours.
func skipDir(path, name string) bool {
	return path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules")
}

// modulePath reads the module directive of a go.mod.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", &os.PathError{Op: "parse", Path: gomod, Err: fs.ErrInvalid}
}

// walkModule calls fn for every .go file of m, tests included, leaving out the directories of
// the modules nested in it.
func walkModule(m goModule, mods []goModule, fn func(file string) error) error {
	return filepath.WalkDir(m.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == m.dir {
				return nil
			}
			if skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			for _, o := range mods {
				if o.dir == path {
					return filepath.SkipDir // a module of its own
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}

// internalOwner returns the module that owns import path p when p is under one of its internal/
// directories; nil when p is no module's internal package (or no module of the repository's).
func internalOwner(p string, mods []goModule) *goModule {
	for i, m := range mods { // the deepest first
		rest, ok := strings.CutPrefix(p, m.path)
		if !ok || (rest != "" && rest[0] != '/') {
			continue
		}
		if strings.Contains(rest+"/", "/internal/") {
			return &mods[i]
		}
		return nil
	}
	return nil
}
