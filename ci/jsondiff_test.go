package ci_test

import (
	"slices"
	"testing"

	"github.com/cuecast/cuecast/ci"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     []string // "op path old new breaking"
	}{
		{"equal", `{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`, nil},
		{"scalar changed", `{"a":1}`, `{"a":2}`, []string{"changed a 1 2 false"}},
		{"number as written", `{"a":1.0}`, `{"a":1}`, []string{"changed a 1.0 1 false"}},
		{"field added", `{"a":1}`, `{"a":1,"b":{"c":true}}`, []string{`added b  {"c":true} false`}},
		{"field removed", `{"a":1,"b":2}`, `{"a":1}`, []string{"removed b 2  true"}},
		{"type changed", `{"a":"1"}`, `{"a":1}`, []string{`type a "1" 1 true`}},
		{"null to value", `{"a":null}`, `{"a":false}`, []string{"type a null false true"}},
		{"object to list", `{"a":{}}`, `{"a":[]}`, []string{"type a {} [] true"}},
		{"nested", `{"a":{"b":{"c":1,"d":2}}}`, `{"a":{"b":{"c":3}}}`, []string{"changed a.b.c 1 3 false", "removed a.b.d 2  true"}},
		{"list grows", `{"l":[1]}`, `{"l":[1,2]}`, []string{"added l[1]  2 false"}},
		{"list shrinks", `{"l":[1,2]}`, `{"l":[1]}`, []string{"removed l[1] 2  false"}},
		{"field in list element removed", `{"l":[{"x":1,"y":2}]}`, `{"l":[{"x":1}]}`, []string{"removed l[0].y 2  true"}},
		{"odd keys", `{"a.b":1,"x-y":1}`, `{"a.b":2,"x-y":2}`, []string{`changed ["a.b"] 1 2 false`, "changed x-y 1 2 false"}},
		{"root type", `{}`, `[]`, []string{"type . {} [] true"}},
		{"no html escaping", `{"a":"<"}`, `{"a":"&"}`, []string{`changed a "<" "&" false`}},
		// Lists are diffed as lists: a prepended element is one insertion,
		// not every index shifting.
		{"list prepend", `{"r":["eu","us","ap","sa"]}`, `{"r":["af","eu","us","ap","sa"]}`, []string{`added r[0]  "af" false`}},
		{"list remove middle", `{"r":["eu","us","ap"]}`, `{"r":["eu","ap"]}`, []string{`removed r[1] "us"  false`}},
		{"list element edited", `{"r":[1,2,3]}`, `{"r":[1,5,3]}`, []string{"changed r[1] 2 5 false"}},
		{"keyed list matched by name", `{"p":[{"name":"a","w":1},{"name":"b","w":2}]}`, `{"p":[{"name":"c","w":0},{"name":"a","w":1},{"name":"b","w":3}]}`,
			[]string{`added p[name="c"]  {"name":"c","w":0} false`, `changed p[name="b"].w 2 3 false`}},
		{"keyed list element removed", `{"p":[{"id":1},{"id":2}]}`, `{"p":[{"id":2}]}`, []string{`removed p[id=1] {"id":1}  false`}},
		{"keyed list reordered", `{"p":[{"id":1},{"id":2}]}`, `{"p":[{"id":2},{"id":1}]}`, []string{`changed p [{"id":1},{"id":2}] [{"id":2},{"id":1}] false`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ci.Diff([]byte(tt.old), []byte(tt.new))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range d {
				got = append(got, string(x.Op)+" "+x.Path+" "+string(x.Old)+" "+string(x.New)+" "+map[bool]string{true: "true", false: "false"}[x.Breaking])
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := ci.Diff([]byte(`{`), []byte(`{}`)); err == nil {
		t.Error("invalid JSON: got no error")
	}
}

// TestDiffNewField: an object field only at head is marked for services
// that decode strictly; a list element is not a field.
func TestDiffNewField(t *testing.T) {
	d, err := ci.Diff([]byte(`{"a":1,"l":[1]}`), []byte(`{"a":1,"b":2,"l":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 2 || d[0].Path != "b" || !d[0].NewField || d[1].Path != "l[1]" || d[1].NewField {
		t.Errorf("got %+v, want b marked as a new field and l[1] not", d)
	}
}
