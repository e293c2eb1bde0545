package web_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/webtest"
)

// ofrepPost posts body to an OFREP endpoint with token as a bearer.
func ofrepPost(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	code, b := ofrepRaw(t, url, token, body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("POST %s: %q: %v", url, b, err)
		}
	}
	return code, m
}

// ofrepRaw is ofrepPost's request: the status and the body as sent.
func ofrepRaw(t *testing.T, url, token, body string) (int, []byte) {
	t.Helper()
	return webtest.Do(t, webtest.Request{Method: http.MethodPost, URL: url, Token: token, Body: body})
}

// TestServeOFREP: serve --http evaluates the newest published version of
// configs-example's growth/flags over OFREP, as `flags eval --published`
// does (user-1 at position 97837), and follows a new version. A caller
// holding payments' token plays the attacker: growth's flags are 403 to
// it and absent from its bulk evaluation, and growth's own token still
// gets the next version.
func TestServeOFREP(t *testing.T) {
	growth, payments := strings.Repeat("g", 40), strings.Repeat("p", 40)
	tokens, err := ofrep.ParseTokens("tokens", []byte("growth "+growth+"\npayments "+payments+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, fixtureOptions{ofrepTokens: tokens})
	flag, bulk := f.base+"/ofrep/v1/evaluate/flags/growth/flags/new-checkout", f.base+"/ofrep/v1/evaluate/flags"
	user1 := `{"context": {"targetingKey": "user-1"}}`
	poll.Until(t, "growth/flags over OFREP", poll.Patience, func() (bool, string) {
		code, got := ofrepPost(t, flag, growth, user1)
		return code == 200, fmt.Sprint(code, got)
	})
	code, got := ofrepPost(t, flag, growth, user1)
	md, _ := got["metadata"].(map[string]any)
	if code != 200 || got["value"] != false || got["reason"] != "SPLIT" || md["position"] != 97837.0 || md["config"] != "growth/flags" {
		t.Errorf("new-checkout for user-1: %d %v; want false, SPLIT at 97837", code, got)
	}

	t.Run("attacker with payments' token", func(t *testing.T) {
		if code, _ := ofrepPost(t, flag, payments, user1); code != 403 {
			t.Errorf("single: %d, want 403", code)
		}
		code, got := ofrepPost(t, bulk, payments, user1)
		if code != 200 {
			t.Fatalf("bulk: %d %v", code, got)
		}
		for _, fl := range got["flags"].([]any) {
			if k := fl.(map[string]any)["key"].(string); !strings.HasPrefix(k, "payments/") {
				t.Errorf("payments' token read %s", k)
			}
		}
		if code, _ := ofrepPost(t, flag, "", user1); code != 401 {
			t.Errorf("no token: %d, want 401", code)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for body, want := range map[string]string{`{"context": `: ofrep.CodeParseError, `{"context": 1}`: ofrep.CodeInvalidContext} {
			if code, got := ofrepPost(t, flag, growth, body); code != 400 || got["errorCode"] != want {
				t.Errorf("%s: %d %v, want 400 %s", body, code, got, want)
			}
		}
	})

	path := filepath.Join(f.repo.Dir, "growth", "flags", "flags.cue")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f.repo.CommitFiles("growth: new checkout for everyone", map[string]string{"growth/flags/flags.cue": strings.Replace(string(b),
		`weights: [{variant: "on", weight: 20000}, {variant: "off", weight: 80000}]`, `weights: [{variant: "on", weight: 100000}, {variant: "off", weight: 0}]`, 1)})
	f.p.Tailer.Wake()
	poll.Until(t, "growth/flags v2 over OFREP", poll.Patience, func() (bool, string) {
		_, got := ofrepPost(t, flag, growth, user1)
		md, _ := got["metadata"].(map[string]any)
		return got["value"] == true && md["version"] == 2.0, fmt.Sprint(got)
	})
}

// TestServeOFREPOffWithoutTokens: docs/SECURITY.md, serve serves OFREP only
// with --ofrep-tokens; without them both endpoints are 404, to any token.
func TestServeOFREPOffWithoutTokens(t *testing.T) {
	f := start(t, fixtureOptions{})
	for _, url := range []string{f.base + "/ofrep/v1/evaluate/flags/growth/flags/new-checkout", f.base + "/ofrep/v1/evaluate/flags"} {
		for _, token := range []string{"", strings.Repeat("g", 40)} {
			// A 404 of the mux: text, not OFREP's JSON.
			if code, _ := ofrepRaw(t, url, token, `{"context": {"targetingKey": "user-1"}}`); code != http.StatusNotFound {
				t.Errorf("POST %s (token %q): %d, want 404", url, token, code)
			}
		}
	}
}

// TestServeOFREPNoLongerAFlagSet: growth's schema taken out of the
// manifest makes growth/flags@2 a plain config; serve stops serving its
// flags (as for a deleted config) and logs a warning saying so, instead of
// answering version 1's flags for ever.
func TestServeOFREPNoLongerAFlagSet(t *testing.T) {
	tokens, growth := growthTokens(t)
	var buf syncBuffer
	f := start(t, fixtureOptions{ofrepTokens: tokens, log: slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})})
	flag, bulk := f.base+"/ofrep/v1/evaluate/flags/growth/flags/new-checkout", f.base+"/ofrep/v1/evaluate/flags"
	user1 := `{"context": {"targetingKey": "user-1"}}`
	poll.Until(t, "growth/flags over OFREP", poll.Patience, func() (bool, string) {
		code, got := ofrepPost(t, flag, growth, user1)
		return code == 200, fmt.Sprint(code, got)
	})

	b, err := os.ReadFile(filepath.Join(f.repo.Dir, "cuecast.cue"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(string(b), "\tschema:      \"github.com/cuecast/cuecast/schemas#FlagSet\"\n", "", 1)
	if manifest == string(b) {
		t.Fatal("cuecast.cue: growth's schema line not found")
	}
	f.repo.CommitFiles("growth: no schema", map[string]string{"cuecast.cue": manifest})
	f.p.Tailer.Wake()
	poll.Until(t, "the warning that growth/flags is no longer a flag set", poll.Patience, func() (bool, string) {
		for _, r := range buf.records(t) {
			if r["config"] == "growth/flags" && strings.Contains(fmt.Sprint(r["msg"]), "no longer a flag set") {
				return true, ""
			}
		}
		_, got := ofrepPost(t, flag, growth, user1)
		return false, fmt.Sprint("no warning; OFREP answers ", got)
	})
	if code, got := ofrepPost(t, flag, growth, user1); code != 404 || got["errorCode"] != ofrep.CodeFlagNotFound {
		t.Errorf("new-checkout: %d %v, want 404 FLAG_NOT_FOUND", code, got)
	}
	if code, got := ofrepPost(t, bulk, growth, user1); code != 200 || len(got["flags"].([]any)) != 0 || len(got["metadata"].(map[string]any)) != 0 {
		t.Errorf("bulk: %d %v, want 200 and no flags", code, got)
	}
}

// TestServeOFREPFollowsRollback: an operator's emergency rollback of a bad
// flag set version pins every instance to the version before, but serve's
// OFREP went on evaluating the newest published version, so every SDK
// reading its flags there kept the bad one. It now evaluates the version
// the fleet is meant to run (the pin's here), as the instances do.
func TestServeOFREPFollowsRollback(t *testing.T) {
	tokens, growth := growthTokens(t)
	f := start(t, fixtureOptions{ofrepTokens: tokens})
	at := newCheckoutAt(t, f, growth)
	poll.Until(t, "growth/flags v1 over OFREP", poll.Patience, at(1, false))
	f.repo.Edit("growth/flags/flags.cue", `weights: [{variant: "on", weight: 20000}, {variant: "off", weight: 80000}]`,
		`weights: [{variant: "on", weight: 100000}, {variant: "off", weight: 0}]`)
	f.repo.Commit("growth: new checkout for everyone")
	f.p.Tailer.Wake()
	poll.Until(t, "growth/flags v2 over OFREP", poll.Patience, at(2, true))

	if _, err := f.p.Rollout.Rollback(t.Context(), "growth/flags", 1, rollout.Action{Actor: "ada", Reason: "checkout errors"}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "growth/flags v1 over OFREP after the rollback", poll.Patience, at(1, false))
}

// TestServeOFREPFollowsStagedRollout: serve's OFREP belongs to no cohort,
// so it serves the version an instance no stage has reached runs. It served
// each flag set's target, which for a staged rollout is the new version from
// its canary on: every service reading its flags there got v2 while the
// rollout held v2 in its canary, and staging never protected them. v2 is
// served once the rollout's last stage moves everyone; a halted rollout
// keeps its From.
func TestServeOFREPFollowsStagedRollout(t *testing.T) {
	tokens, growth := growthTokens(t)
	const cfg cuecast.ConfigPath = "growth/flags"
	f := start(t, fixtureOptions{ofrepTokens: tokens, policies: canaryFrom{from: 2, instances: []string{"growth-a"}}})
	f.watch(cfg, "growth-a")
	f.watch(cfg, "growth-b")
	at := newCheckoutAt(t, f, growth)
	seen := func(state rollout.State, stage string) { t.Helper(); rolloutSeen(t, f, cfg, 2, state, stage) }
	// still checks that OFREP answers v1 over the next few samples.
	still := func(why string) {
		t.Helper()
		const ts = "cuecast_fleet_sample_timestamp_seconds"
		samples := map[float64]bool{}
		poll.Until(t, "three more samples "+why, poll.Patience, func() (bool, string) {
			if ok, got := at(1, false)(); !ok {
				t.Fatalf("%s: OFREP answers %s, want v1", why, got)
			}
			samples[scrape(t, f.base)[ts]] = true
			return len(samples) > 3, fmt.Sprintf("%d samples", len(samples))
		})
	}
	poll.Until(t, "growth/flags v1 over OFREP", poll.Patience, at(1, false))

	f.repo.Edit("growth/flags/flags.cue", `weights: [{variant: "on", weight: 20000}, {variant: "off", weight: 80000}]`,
		`weights: [{variant: "on", weight: 100000}, {variant: "off", weight: 0}]`)
	f.repo.Commit("growth: new checkout for everyone")
	f.p.Tailer.Wake()
	seen(rollout.StateHolding, "canary")
	still("while v2 holds in its canary")

	if _, err := f.p.Rollout.Halt(t.Context(), cfg, rollout.Action{Actor: "ada", Reason: "checkout errors"}); err != nil {
		t.Fatal(err)
	}
	seen(rollout.StateHalted, "canary")
	still("after the halt (its From)")

	if _, err := f.p.Rollout.Advance(t.Context(), cfg, rollout.Action{Actor: "ada", Reason: "fixed elsewhere", Emergency: true}); err != nil {
		t.Fatal(err)
	}
	seen(rollout.StateComplete, "all")
	poll.Until(t, "growth/flags v2 over OFREP once v2's rollout is complete", poll.Patience, at(2, true))
}

// rolloutSeen waits for the dashboard's sample to show the rollout of cfg's
// version in state at stage; that sample has brought OFREP up to date.
func rolloutSeen(t *testing.T, f *fixture, cfg cuecast.ConfigPath, version uint64, state rollout.State, stage string) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("the dashboard showing v%d's rollout %s at %s", version, state, stage), poll.Patience, func() (bool, string) {
		_, body := get(t, f.base+"/api/configs/"+string(cfg))
		var cv struct {
			Row struct {
				Version uint64
				Rollout string
				Stage   string
			}
		}
		if err := json.Unmarshal([]byte(body), &cv); err != nil {
			t.Fatal(err)
		}
		return cv.Row.Version == version && cv.Row.Rollout == string(state) && cv.Row.Stage == stage, fmt.Sprintf("%+v", cv.Row)
	})
}

// TestServeOFREPFirstVersionInStages: a flag set's first version held in
// its canary has reached no instance outside it, so serve's OFREP, which
// belongs to no cohort, does not serve it yet: its keys are FLAG_NOT_FOUND,
// as for a set that does not exist, rather than "not ready" (the other
// configs are served), until the rollout's last stage moves.
func TestServeOFREPFirstVersionInStages(t *testing.T) {
	tokens, growth := growthTokens(t)
	const cfg cuecast.ConfigPath = "growth/flags"
	f := start(t, fixtureOptions{ofrepTokens: tokens, policies: canaryFrom{from: 1, instances: []string{"growth-a"}}})
	f.watch(cfg, "growth-a")
	flag := f.base + "/ofrep/v1/evaluate/flags/growth/flags/new-checkout"
	user1 := `{"context": {"targetingKey": "user-1"}}`
	rolloutSeen(t, f, cfg, 1, rollout.StateHolding, "canary")
	if code, got := ofrepPost(t, flag, growth, user1); code != 404 || got["errorCode"] != ofrep.CodeFlagNotFound {
		t.Errorf("new-checkout while v1 holds in its canary: %d %v, want 404 FLAG_NOT_FOUND", code, got)
	}

	if _, err := f.p.Rollout.Advance(t.Context(), cfg, rollout.Action{Actor: "ada", Reason: "looks good", Emergency: true}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "growth/flags v1 over OFREP once its last stage moved", poll.Patience, func() (bool, string) {
		code, got := ofrepPost(t, flag, growth, user1)
		md, _ := got["metadata"].(map[string]any)
		return code == 200 && md["version"] == 1.0, fmt.Sprint(code, got)
	})
}

// growthTokens is an OFREP tokens file with one token, the one it returns,
// reading namespace growth.
func growthTokens(t testing.TB) (*ofrep.Tokens, string) {
	t.Helper()
	growth := strings.Repeat("g", 40)
	tokens, err := ofrep.ParseTokens("tokens", []byte("growth "+growth+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return tokens, growth
}

// newCheckoutAt is a poll condition maker: serve's OFREP answers user-1's
// growth/flags/new-checkout with value from version.
func newCheckoutAt(t *testing.T, f *fixture, token string) func(version float64, value bool) func() (bool, string) {
	flag := f.base + "/ofrep/v1/evaluate/flags/growth/flags/new-checkout"
	return func(version float64, value bool) func() (bool, string) {
		return func() (bool, string) {
			_, got := ofrepPost(t, flag, token, `{"context": {"targetingKey": "user-1"}}`)
			md, _ := got["metadata"].(map[string]any)
			return got["value"] == value && md["version"] == version, fmt.Sprint(got)
		}
	}
}
