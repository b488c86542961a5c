package watchtree

import (
	"context"
	"fmt"
	"github.com/watchtree/watchtree/internal/policyx"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/watchtree/watchtree/policy"
)

// A refType is a public configuration struct whose exported fields the README's configuration
// reference documents, one table per type.
type refType struct {
	heading  string            // the line that introduces the README table starts with it
	file     string            // the source file declaring the type (for its godoc)
	name     string            // the type's name in file
	zero     any               // its zero value
	defaults func() any        // the zero value with its defaults applied, as the runtime applies them; nil: none to compute
	varies   map[string]string // fields whose default depends on the machine, with the reason
}

func configReference() []refType {
	return []refType{
		{heading: "`watchtree.Config`", file: "config.go", name: "Config", zero: Config{},
			defaults: func() any { return Config{}.withDefaults() },
			varies:   map[string]string{"InstanceID": "hostname, pid, random", "InstanceName": "the hostname"}},
		{heading: "`watchtree.ConsoleConfig`", file: "console.go", name: "ConsoleConfig", zero: ConsoleConfig{}},
		{heading: "`watchtree.Stream[T]`", file: "stream.go", name: "Stream", zero: Stream[bson.Raw]{},
			defaults: func() any {
				s := Stream[bson.Raw]{Name: "s", OnChange: func(context.Context, *Event[bson.Raw]) error { return nil }}
				cs, err := s.compile()
				if err != nil {
					panic(err)
				}
				return Stream[bson.Raw]{Lanes: cs.Lanes} // the one scalar compile defaults; policies have tables of their own
			}},
		{heading: "`watchtree.RetryPolicy`", file: "policy/backoff.go", name: "Retry", zero: RetryPolicy{},
			defaults: func() any { return policyx.WithDefaults(policy.Retry{}) }}, // the same field order
		{heading: "`watchtree.RestartPolicy`", file: "policy/backoff.go", name: "Restart", zero: RestartPolicy{},
			defaults: func() any { return policyx.WithDefaults(policy.Restart{}) }}, // the same field order
		{heading: "`watchtree.CheckpointPolicy`", file: "policy/checkpoint.go", name: "Checkpoint", zero: CheckpointPolicy{},
			defaults: func() any { return policyx.WithDefaults(policy.Checkpoint{}) }}, // the same field order
		{heading: "`watchtree.DeadLetterPolicy`", file: "policy.go", name: "DeadLetterPolicy", zero: DeadLetterPolicy{},
			defaults: func() any { return DeadLetterPolicy{}.withDefaults() }},
		{heading: "`watchtree.LeasePolicy`", file: "policy/lease.go", name: "Lease", zero: LeasePolicy{},
			defaults: func() any { return policyx.WithDefaults(policy.Lease{}) }}, // the same field order
		{heading: "`watchtree.SnapshotPolicy`", file: "policy/snapshot.go", name: "Snapshot", zero: SnapshotPolicy{},
			defaults: func() any { return policyx.WithDefaults(policy.Snapshot{}) }}, // the same field order
	}
}

// TestReadmeConfigurationReference checks the README's configuration reference against the code:
// every exported field of every public configuration struct has a row in its type's table; its
// godoc states a default (or that it is required); the default the godoc states is the one the
// README states; and a default the code computes (withDefaults, WithDefaults, compile) is the
// value both state. A field added without docs, or a default changed in one place only, fails.
func TestReadmeConfigurationReference(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range configReference() {
		t.Run(rt.name, func(t *testing.T) {
			table, err := readmeTable(string(readme), rt.heading)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := fieldDocs(rt.file, rt.name)
			if err != nil {
				t.Fatal(err)
			}
			typ := reflect.TypeOf(rt.zero)
			var defaulted reflect.Value
			if rt.defaults != nil {
				defaulted = reflect.ValueOf(rt.defaults())
			}
			fields := map[string]bool{}
			for i := range typ.NumField() {
				f := typ.Field(i)
				if !f.IsExported() {
					continue
				}
				fields[f.Name] = true
				cell, ok := table[f.Name]
				if !ok {
					t.Errorf("README %s table has no row for %s: add it with its default", rt.heading, f.Name)
					continue
				}
				doc := docs[f.Name]
				if doc == "" {
					t.Errorf("%s.%s (%s) has no doc comment", rt.name, f.Name, rt.file)
					continue
				}
				stated, hasDefault := statedDefault(doc)
				if !hasDefault && !strings.Contains(strings.ToLower(doc), "required") {
					t.Errorf("%s.%s's godoc states no default (\"Default …\" or \"Required\"): %q", rt.name, f.Name, doc)
				}
				if key := defaultKey(stated); key != "" && !containsFold(cell, key) {
					t.Errorf("%s.%s: the godoc says the default is %q, the README says %q", rt.name, f.Name, stated, cell)
				}
				if !defaulted.IsValid() || rt.varies[f.Name] != "" {
					continue
				}
				v := defaulted.Field(i)
				if v.IsZero() {
					continue // the zero value is the default: nothing computed
				}
				forms := renderings(v)
				if forms == nil {
					continue // not a scalar (a logger, an observer): the godoc and README say what it is
				}
				if !containsAny(cell, forms) {
					t.Errorf("%s.%s: the code defaults it to %v, the README says %q", rt.name, f.Name, v.Interface(), cell)
				}
				if !containsAny(stated, forms) {
					t.Errorf("%s.%s: the code defaults it to %v, the godoc says %q", rt.name, f.Name, v.Interface(), stated)
				}
			}
			for name := range table {
				if !fields[name] {
					t.Errorf("README %s table has a row for %s, which %s does not have", rt.heading, name, rt.name)
				}
			}
		})
	}
}

// readmeTable returns the rows of the first table after the line starting with heading: the
// field names (backticked, in the first cell) mapped to the default cell.
func readmeTable(readme, heading string) (map[string]string, error) {
	lines := strings.Split(readme, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, heading) {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("README has no line starting with %s", heading)
	}
	rows := map[string]string{}
	inTable := false
	for _, l := range lines[start+1:] {
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if len(cells) < 3 || strings.TrimSpace(cells[0]) == "field" || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			rows[m[1]] = strings.TrimSpace(cells[1])
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("README: no table rows after %s", heading)
	}
	return rows, nil
}

var backticked = regexp.MustCompile("`([A-Z][A-Za-z0-9]*)`")

// fieldDocs returns the doc comment of every field of the struct type name in file. A field
// without a comment of its own that follows a commented field on the next line shares that
// comment ("OnInsert, OnUpdate, OnReplace and OnDelete handle ...").
func fieldDocs(file, name string) (map[string]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != name {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		found = true
		group, prevLine := "", -1
		for _, fld := range st.Fields.List {
			line := fset.Position(fld.Pos()).Line
			doc := fld.Doc.Text() + fld.Comment.Text()
			switch {
			case doc != "":
				group = doc
			case line == prevLine+1:
				doc = group
			default:
				group = ""
			}
			prevLine = fset.Position(fld.End()).Line
			for _, id := range fld.Names {
				docs[id.Name] = strings.Join(strings.Fields(doc), " ")
			}
		}
		return false
	})
	if !found {
		return nil, fmt.Errorf("%s declares no struct type %s", file, name)
	}
	return docs, nil
}

// statedDefault returns the godoc's default sentence: the text after "Default" up to the end of
// its sentence ("Default 30s.", "Default: the runtime creates its own", "30s by default").
func statedDefault(doc string) (string, bool) {
	for _, marker := range []string{"Default: ", "Default ", "is the default: "} {
		if i := strings.Index(doc, marker); i >= 0 {
			rest := doc[i+len(marker):]
			if j := strings.Index(rest, ". "); j >= 0 {
				rest = rest[:j]
			}
			return strings.TrimSuffix(strings.TrimSpace(rest), "."), true
		}
	}
	if strings.Contains(doc, "by default") || strings.Contains(doc, "means the default") || strings.Contains(doc, "(the default)") {
		return "", true
	}
	return "", false
}

// defaultKey is the word of a stated default that the README must repeat: its first word that
// is not an article, without quotes, backticks and trailing punctuation ("\"_wt_dead_letters\"" →
// _wt_dead_letters, "the runtime's Config.Client" → runtime's).
func defaultKey(stated string) string {
	for _, w := range strings.Fields(stated) {
		w = strings.Trim(w, "\"`',;:()")
		switch strings.ToLower(w) {
		case "", "the", "a", "an", "is", "it":
			continue
		}
		return w
	}
	return ""
}

// renderings are the ways the docs may write a computed default: 60s, 1m, 1 minute; 1000,
// 1,000; 2, 2.0; 14 days.
func renderings(v reflect.Value) []string {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		d := time.Duration(v.Int())
		s := strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
		forms := []string{d.String(), s}
		if d%time.Second == 0 {
			forms = append(forms, fmt.Sprintf("%ds", d/time.Second))
		}
		if d%time.Minute == 0 {
			n := int(d / time.Minute)
			forms = append(forms, fmt.Sprintf("%d minutes", n), fmt.Sprintf("%d min", n))
			if n == 1 {
				forms = append(forms, "1 minute")
			}
		}
		if d%(24*time.Hour) == 0 {
			forms = append(forms, fmt.Sprintf("%d days", d/(24*time.Hour)))
		}
		return forms
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		n := v.Int()
		if v.CanUint() {
			n = int64(v.Uint())
		}
		return []string{strconv.FormatInt(n, 10), thousands(n)}
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		return []string{strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(f, 'f', 1, 64)}
	case reflect.String:
		return []string{v.String()}
	case reflect.Bool:
		return []string{"on", "true"}
	}
	return nil
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// containsAny reports whether s holds one of forms as a whole word (so 1s does not match 11s).
func containsAny(s string, forms []string) bool {
	for _, f := range forms {
		if f == "" {
			continue
		}
		re := regexp.MustCompile(`(^|[^0-9A-Za-z_.,])` + regexp.QuoteMeta(f) + `($|[^0-9A-Za-z_])`)
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
