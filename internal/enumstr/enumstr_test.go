package enumstr

import "testing"

type color uint8

type sign int

// TestOf: a value in the table gives its name; an empty name, a value past the table and a
// negative value give "<Type>(<n>)".
func TestOf(t *testing.T) {
	names := []string{"", "red", "green"}
	for _, c := range []struct {
		got, want string
	}{
		{Of(names, color(1), "Color"), "red"},
		{Of(names, color(2), "Color"), "green"},
		{Of(names, color(0), "Color"), "Color(0)"},
		{Of(names, color(255), "Color"), "Color(255)"},
		{Of([]string{"minus", "plus"}, sign(-1), "Sign"), "Sign(-1)"},
		{Of([]string{"minus", "plus"}, sign(1), "Sign"), "plus"},
	} {
		if c.got != c.want {
			t.Errorf("Of = %q, want %q", c.got, c.want)
		}
	}
}
