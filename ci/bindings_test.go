package ci_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/internal/githubtest"
)

// TestCheckBindingsChange: a change to a namespace's schema definition
// warns, in the report, its text and the pull request comment, that the
// namespace's generated bindings change, naming the languages whose
// bindings differ (a new currency is a new literal in TypeScript and JSON
// Schema; Go types it as string either way); a change to a definition no
// namespace schema reaches, in the same schema package, does not; neither
// fails the check.
func TestCheckBindingsChange(t *testing.T) {
	r, base := exampleRepo(t)
	r.Edit("schemas/payments.cue", "max_amount_minor: int & >0 & <=100_000_000", "max_amount_minor: int & >0 & <=200_000_000")
	unrelated := r.Commit("schemas: raise #Checkout's limit, which #Payments does not reach")
	r.Edit("schemas/payments.cue", `currency?: "EUR" | "USD" | "GBP" | "JPY"`, `currency?: "EUR" | "USD" | "GBP" | "JPY" | "CHF"`)
	head := r.Commit("schemas: payments may use CHF")

	if rep := check(t, r, base, unrelated); len(rep.Bindings) != 0 || rep.Failed() {
		t.Errorf("#Checkout change: bindings %+v, failed %v; want no bindings change, not failed", rep.Bindings, rep.Failed())
	}

	rep := check(t, r, unrelated, head)
	want := []ci.BindingsChange{{Namespace: "payments", Schema: "example.com/configs/schemas#Payments", Languages: []string{"ts", "jsonschema"}}}
	if !slices.EqualFunc(rep.Bindings, want, func(a, b ci.BindingsChange) bool {
		return a.Namespace == b.Namespace && a.Schema == b.Schema && slices.Equal(a.Languages, b.Languages)
	}) {
		t.Fatalf("bindings: got %+v, want %+v", rep.Bindings, want)
	}
	if rep.Failed() {
		t.Errorf("check failed for a bindings change: %v", rep.Errors)
	}
	text := textReport(t, rep)
	if !strings.Contains(text, "! payments  its ts, jsonschema bindings of example.com/configs/schemas#Payments change") {
		t.Errorf("text report does not warn about payments' bindings:\n%s", text)
	}

	gh := githubtest.New(t)
	g, _ := newReporter(t, gh, 9)
	if err := publish(t.Context(), g, rep); err != nil {
		t.Fatal(err)
	}
	cs := gh.Comments(9)
	if len(cs) != 1 || !strings.Contains(cs[0].Body, "### Typed bindings\n\n- ⚠️ `payments`: its ts, jsonschema bindings") ||
		!strings.Contains(cs[0].Body, "cuecast gen ts payments") {
		t.Errorf("pull request comment does not warn about payments' bindings: %+v", cs)
	}
}
