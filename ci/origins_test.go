package ci_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/ci"
)

func TestExplainChanges(t *testing.T) {
	r, base := exampleRepo(t)
	r.Edit("payments/checkout/checkout.cue", `currency:         "EUR"`, `currency:         "USD"`)
	r.Edit("payments/checkout/checkout.cue", `weight: 80`, `weight: 70`)
	r.Edit("payments/checkout/checkout.cue", `weight: 20`, `weight: 30`)
	head := r.Commit("checkout: USD, more adyen")
	rep := check(t, r, base, head)
	if err := ci.ExplainChanges(context.Background(), r.Dir, rep); err != nil {
		t.Fatalf("ExplainChanges: %v", err)
	}
	origins := rep.Origins
	// Check explains over the head tree it read, to the same origins.
	explained, err := ci.Check(context.Background(), r.Dir, ci.Options{Base: base, Head: head, FanOut: 3, Workers: 2, Explain: true})
	if err != nil {
		t.Fatalf("Check with Explain: %v", err)
	}
	if !reflect.DeepEqual(explained.Origins, origins) {
		t.Errorf("Check with Explain gives origins\n%v\nExplainChanges\n%v", explained.Origins, origins)
	}
	var got []string
	for _, o := range origins {
		if o.Config != "payments/checkout" {
			t.Errorf("origin of %s %s: only payments/checkout changed", o.Config, o.Path)
		}
		got = append(got, o.String())
	}
	want := []string{
		`currency = "USD"  literal  payments/checkout/checkout.cue:19:19, `,
		`providers[0].weight = 70  literal  payments/checkout/checkout.cue:23:27, `,
		`providers[1].weight = 30  literal  payments/checkout/checkout.cue:24:26, `,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d origins, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("origin %d:\ngot  %s\nwant %s…", i, got[i], want[i])
		}
	}
	md := rep.Markdown(0)
	for _, s := range []string{"### Where the changed values come from", "#### `payments/checkout`", want[0]} {
		if !strings.Contains(md, s) {
			t.Errorf("OriginsMarkdown lacks %q:\n%s", s, md)
		}
	}
	if md := ci.OriginsMarkdown(origins, 300); strings.Contains(md, "####") || !strings.Contains(md, "1 more config(s) left out") {
		t.Errorf("OriginsMarkdown(300) does not leave the config out with a note:\n%s", md)
	}
}
