package web_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestMetricsDuringRun scrapes /metrics while commits flow through the
// pipeline and checks that the counters and the coverage gauge move.
func TestMetricsDuringRun(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		// v3's rollout holds in a canary of two of the three instances.
		f := start(t, fixtureOptions{policies: canaryFrom{from: 3, instances: []string{"checkout-1", "checkout-2"}}})
		f.watch(checkout, "checkout-1")
		f.watch(checkout, "checkout-2")
		w3 := f.watch(checkout, "checkout-3")

		cov := `cuecast_config_coverage_ratio{config="payments/checkout"}`
		inst := `cuecast_config_instances{config="payments/checkout"}`
		onTarget := `cuecast_config_instances_on_target{config="payments/checkout"}`
		target := `cuecast_config_target_version{config="payments/checkout"}`
		published := `cuecast_versions_published_total{namespace="payments"}`
		commitsOK := `cuecast_tailer_commits_total{result="published"}`
		rejected := `cuecast_tailer_commits_total{result="rejected"}`
		prop100 := `cuecast_propagation_seconds_count{coverage="1",namespace="payments"}`
		prop50 := `cuecast_propagation_seconds_count{coverage="0.5",namespace="payments"}`

		var m map[string]float64
		poll.Until(t, "three instances on v1", poll.Patience, func() (bool, string) {
			m = scrape(t, f.base)
			return m[target] == 1 && m[inst] == 3 && m[cov] == 1, fmt.Sprintf("target %v, instances %v, coverage %v", m[target], m[inst], m[cov])
		})
		// Whether v1's propagation counts depends on whether the instances
		// reported before v1 was published (an empty fleet propagates nothing),
		// so the propagation counts below are relative to this scrape.
		before := m
		if before[published] < 3 || before[commitsOK] != 1 {
			t.Fatalf("after the first commit: %s = %v, %s = %v; want >= 3 and 1", published, before[published], commitsOK, before[commitsOK])
		}
		if before["cuecast_compile_duration_seconds_count"] < 1 {
			t.Errorf("compile histogram count = %v, want >= 1", before["cuecast_compile_duration_seconds_count"])
		}

		f.setAmount("2_500_000")
		poll.Until(t, "v2 everywhere", poll.Patience, func() (bool, string) {
			m = scrape(t, f.base)
			return m[target] == 2 && m[cov] == 1 && m[prop100] >= before[prop100]+1,
				fmt.Sprintf("target %v, coverage %v, propagation count %v; %s", m[target], m[cov], m[prop100], f.readyz())
		})
		for _, c := range []struct {
			name string
			want float64
		}{
			{published, before[published] + 1},
			{commitsOK, 2},
			{rejected, 0},
			{prop50, before[prop50] + 1},
			{prop100, before[prop100] + 1},
			{"cuecast_tailer_lag_commits", 0},
			{"cuecast_tailer_halted", 0},
			{`cuecast_config_instances_drifted{config="payments/checkout"}`, 0},
			{`cuecast_config_instances_refused{config="payments/checkout"}`, 0},
		} {
			if got, ok := m[c.name]; got != c.want || !ok {
				t.Errorf("%s = %v (exported %t), want %v", c.name, got, ok, c.want)
			}
		}
		if m["cuecast_tailer_commit_duration_seconds_count"] < 2 {
			t.Errorf("commit duration count = %v, want >= 2", m["cuecast_tailer_commit_duration_seconds_count"])
		}

		// v3 reaches the two in its canary and stops there. The third is
		// live on v2, where its rollout means it to be: coverage (on the
		// intended version) stays 1 while two of three run the target, and
		// v3's propagation passes 50% and never 100%. (The third used to be
		// stopped, for a coverage of 2/3 that held only while its last
		// report outlived v3's propagation; under load it did not.)
		//
		// A sample reads the rollout records before the reports (and keeps
		// the records before when that read fails), so a canary that
		// applies v3 between the two reads, which under load are seconds
		// apart, is counted against the records before v3's rollout for
		// that one sample: coverage 1/3. The next sample counts it right, so
		// the condition waits for coverage 1 with the rest; a coverage that
		// never comes back to 1 still fails it.
		f.setAmount("3_000_000")
		poll.Until(t, "v3 on two of three, the third on its intended v2", poll.Patience, func() (bool, string) {
			m = scrape(t, f.base)
			return m[target] == 3 && m[inst] == 3 && m[onTarget] == 2 && m[prop50] == before[prop50]+2 && m[cov] == 1,
				fmt.Sprintf("target %v, instances %v, on target %v, 50%% count %v, coverage %v", m[target], m[inst], m[onTarget], m[prop50], m[cov])
		})
		if m[prop100] != before[prop100]+1 {
			t.Errorf("%s = %v after a version that never reached everyone, want %v", prop100, m[prop100], before[prop100]+1)
		}
		if v := w3.Current().Version; v != 2 {
			t.Errorf("checkout-3, outside v3's canary, applied v%d, want v2", v)
		}

		// A commit that does not compile is rejected and counted by error ID.
		f.repo.CommitFiles("checkout: break it", map[string]string{
			"payments/checkout/broken.cue": "package checkout\n\nmax_amount_minor: \"lots\"\n",
		})
		poll.Until(t, "rejection counted", poll.Patience, func() (bool, string) {
			m = scrape(t, f.base)
			var ids float64
			for k, v := range m {
				if strings.HasPrefix(k, "cuecast_validation_rejections_total{") {
					ids += v
				}
			}
			return m[rejected] == 1 && ids >= 1, fmt.Sprintf("rejected %v, rejections by id %v", m[rejected], ids)
		})
		if m[target] != 3 {
			t.Errorf("target after a rejected commit = %v, want 3", m[target])
		}
		for k := range m {
			if strings.Contains(k, "checkout-1") {
				t.Errorf("an instance ID is a label value: %s", k)
			}
		}
	})
}

// canaryFrom rolls each version from "from" on out to a canary of the
// instances it names, held for an hour; earlier versions go to all at once.
type canaryFrom struct {
	from      uint64
	instances []string
}

// Policy implements rollout.Policies.
func (c canaryFrom) Policy(ctx context.Context, v cuecast.Version) (cuecast.Policy, cuecast.Consistency, error) {
	if v.Version < c.from {
		return rollout.Static{}.Policy(ctx, v)
	}
	return rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: c.instances, Hold: cuecast.Duration(time.Hour)},
		{Name: "all", Percent: 100},
	}}}.Policy(ctx, v)
}

// TestVersionsNameCarriedCommits: the dashboard's versions of a config name
// the commits that did not compile whose changes a version carries, with
// their authors, as cuecast log does.
func TestVersionsNameCarriedCommits(t *testing.T) {
	f := start(t, fixtureOptions{})
	f.repo.Author = object.Signature{Name: "Alice", Email: "alice@example.com"}
	f.repo.Edit("payments/checkout/checkout.cue", `"EUR"`, `"USD"`)
	bad := f.repo.CommitFiles("checkout: USD, and break it", map[string]string{
		"payments/checkout/broken.cue": "package checkout\n\nmax_amount_minor: \"lots\"\n",
	})
	f.repo.Remove("payments/checkout/broken.cue")
	f.repo.Author = object.Signature{Name: "Bob", Email: "bob@example.com"}
	fix := f.repo.Commit("checkout: unbreak")
	type versions struct {
		Versions []struct {
			Version uint64
			Commit  string
			Author  string
			Carries []cuecast.CommitRef
		}
	}
	var cv versions
	poll.Until(t, "the fix's version listed", poll.Patience, func() (bool, string) {
		_, body := get(t, f.base+"/api/configs/"+string(checkout))
		cv = versions{}
		if err := json.Unmarshal([]byte(body), &cv); err != nil {
			t.Fatal(err)
		}
		return len(cv.Versions) > 0 && cv.Versions[0].Commit == fix, body
	})
	want := []cuecast.CommitRef{{Commit: bad, Author: "Alice <alice@example.com>", Message: "checkout: USD, and break it"}}
	if v := cv.Versions[0]; v.Author != "Bob <bob@example.com>" || !slices.Equal(v.Carries, want) {
		t.Errorf("the fix's version: %+v, want Bob's carrying %+v", v, want)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	f := start(t, fixtureOptions{})
	poll.Until(t, "the first commit's configs listed", poll.Patience, func() (bool, string) {
		_, body := get(t, f.base+"/api/overview")
		return strings.Contains(body, `"config":"payments/checkout"`), body
	})
	for _, c := range []struct {
		path, body string
	}{
		{"/healthz", "ok\n"},
		{"/readyz", "ready\n"},
	} {
		t.Run(c.path, func(t *testing.T) {
			var code int
			var body string
			poll.Until(t, c.path, poll.Patience, func() (bool, string) {
				code, body = get(t, f.base+c.path)
				return code == http.StatusOK, fmt.Sprintf("%d %q", code, body)
			})
			if body != c.body {
				t.Errorf("GET %s = %q, want %q", c.path, body, c.body)
			}
		})
	}
}

// holdPolicy keeps every rollout in its first stage for an hour.
var holdPolicy = rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
	{Name: "canary", Percent: 50, Hold: cuecast.Duration(time.Hour)},
	{Name: "all", Percent: 100},
}}}

// state is what an action would change: the rollout's state, stage and
// version, the stable version, the pin, and the audit stream's length.
type state struct {
	state          rollout.State
	stage          int
	version        uint64
	stable, pinned uint64
	audit          int
}

func (f *fixture) state() state {
	f.t.Helper()
	rec, err := f.p.Rollout.Record(context.Background(), checkout)
	if err != nil {
		f.t.Fatalf("record: %v", err)
	}
	audit, err := f.p.Rollout.Audit(context.Background(), checkout)
	if err != nil {
		f.t.Fatalf("audit: %v", err)
	}
	st := state{stable: rec.Stable, audit: len(audit)}
	if rec.Current != nil {
		st.state, st.stage, st.version = rec.Current.State, rec.Current.Stage, rec.Current.Version
	}
	if rec.Pin != nil {
		st.pinned = rec.Pin.Version
	}
	return st
}

func (f *fixture) post(action, auth, body string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.base+"/api/rollouts/"+action+"/"+string(checkout), strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("POST %s: %v", action, err)
	}
	defer res.Body.Close()
	var e struct{ Error string }
	json.NewDecoder(res.Body).Decode(&e)
	return res.StatusCode, e.Error
}

func (f *fixture) waitRollout() {
	f.t.Helper()
	poll.Until(f.t, "the rollout of v1 holding in its first stage", poll.Patience, func() (bool, string) {
		rec, err := f.p.Rollout.Record(context.Background(), checkout)
		if err != nil {
			return false, err.Error()
		}
		return rec.Current != nil && rec.Current.State == rollout.StateHolding, fmt.Sprintf("%+v", rec.Current)
	})
}

// TestActionsNeedToken: without the operator token every action answers 401
// and changes nothing, whether serve has a token or not.
func TestActionsNeedToken(t *testing.T) {
	for _, srv := range []struct {
		name, token string
	}{
		{"read-only server", ""},
		{"server with token", "s3cret"},
	} {
		t.Run(srv.name, func(t *testing.T) {
			f := start(t, fixtureOptions{policies: holdPolicy, token: srv.token})
			f.waitRollout()
			before := f.state()
			body := `{"reason":"testing","actor":"mallory","version":1}`
			for _, action := range []string{"advance", "halt", "resume", "rollback", "unpin"} {
				for _, auth := range []string{"", "Bearer", "Bearer wrong", "Basic czNjcmV0", "Bearer s3cret2", "Bearer  s3cret", "s3cret"} {
					if code, msg := f.post(action, auth, body); code != http.StatusUnauthorized {
						t.Errorf("%s with Authorization %q: %d %s, want 401", action, auth, code, msg)
					}
				}
			}
			if srv.token == "" {
				if code, _ := f.post("halt", "Bearer s3cret", body); code != http.StatusUnauthorized {
					t.Errorf("halt on a read-only server with a token: %d, want 401", code)
				}
			}
			after := f.state()
			if !reflect.DeepEqual(before, after) {
				t.Errorf("refused actions changed the rollout:\nbefore %+v\nafter  %+v", before, after)
			}
			_, ov := get(t, f.base+"/api/overview")
			if want := fmt.Sprintf(`"actions":%t`, srv.token != ""); !strings.Contains(ov, want) {
				t.Errorf("overview %s, want it to contain %s", ov, want)
			}
		})
	}
}

// TestActionWithToken: the right token halts and resumes a rollout, and the
// controller audits each action under the operator's name.
func TestActionWithToken(t *testing.T) {
	f := start(t, fixtureOptions{policies: holdPolicy, token: "s3cret"})
	f.waitRollout()
	const auth = "Bearer s3cret"
	if code, msg := f.post("halt", auth, `{"actor":"ada"}`); code != http.StatusBadRequest {
		t.Errorf("halt without a reason: %d %s, want 400", code, msg)
	}
	if code, msg := f.post("resume", auth, `{"actor":"ada","reason":"not halted"}`); code != http.StatusConflict {
		t.Errorf("resume of an active rollout: %d %s, want 409", code, msg)
	}
	if code, msg := f.post("halt", auth, `{"actor":"ada","reason":"error rate up"}`); code != http.StatusNoContent {
		t.Fatalf("halt: %d %s, want 204", code, msg)
	}
	if st := f.state(); st.state != rollout.StateHalted {
		t.Fatalf("after halt: rollout %+v, want halted", st)
	}
	audit, err := f.p.Rollout.Audit(context.Background(), checkout)
	if err != nil {
		t.Fatal(err)
	}
	last := audit[len(audit)-1]
	if last.Action != "halt" || last.Actor != "web:ada" || last.Reason != "error rate up" {
		t.Errorf("audit entry %+v, want halt by web:ada for \"error rate up\"", last)
	}
	poll.Until(t, "halt counted", poll.Patience, func() (bool, string) {
		m := scrape(t, f.base)
		k := `cuecast_rollout_halts_total{cause="operator"}`
		return m[k] == 1 && m[`cuecast_rollouts{state="halted"}`] >= 1, fmt.Sprintf("%s = %v", k, m[k])
	})
	if code, msg := f.post("resume", auth, `{"actor":"ada","reason":"false alarm"}`); code != http.StatusNoContent {
		t.Fatalf("resume: %d %s, want 204", code, msg)
	}
	if st := f.state(); !st.state.Active() {
		t.Errorf("after resume: rollout %+v, want active", st)
	}
}

// TestEventsStream: a config page's event stream delivers a new version and
// its coverage without being asked again.
func TestEventsStream(t *testing.T) {
	inBothModes(t, fixtureOptions{}, func(t *testing.T, f *fixture) {
		w := f.watch(checkout, "checkout-1")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/api/events?config="+string(checkout), nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("Content-Type %q, want text/event-stream", ct)
		}
		type row struct {
			Version   uint64  `json:"version"`
			Coverage  float64 `json:"coverage"`
			Instances int     `json:"instances"`
		}
		rows := make(chan row, 100)
		go func() {
			defer close(rows)
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(make([]byte, 1<<20), 4<<20)
			event := ""
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "event: "):
					event = strings.TrimPrefix(line, "event: ")
				case strings.HasPrefix(line, "data: ") && event == "config":
					var v struct {
						Row row `json:"row"`
					}
					if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err == nil {
						rows <- v.Row
					}
				}
			}
		}()
		wait := func(what string, ok func(row) bool) {
			t.Helper()
			deadline := time.After(30 * time.Second)
			var last row
			for {
				select {
				case r, open := <-rows:
					if !open {
						t.Fatalf("%s: the stream ended; last %+v", what, last)
					}
					if last = r; ok(r) {
						return
					}
				case <-deadline:
					t.Fatalf("%s: last event %+v after 30s; %s", what, last, f.diagnose(w))
				}
			}
		}
		wait("v1 on the instance", func(r row) bool { return r.Version == 1 && r.Instances == 1 && r.Coverage == 1 })
		f.setAmount("1_000_000")
		wait("v2 on the instance", func(r row) bool { return r.Version == 2 && r.Instances == 1 && r.Coverage == 1 })
	})
}

// readyz is what the server's /readyz says of its fleet samples.
func (f *fixture) readyz() string {
	code, body := get(f.t, f.base+"/readyz")
	return fmt.Sprintf("readyz %d %s", code, strings.TrimSpace(body))
}

// diagnose says where a change to checkout stands at each layer, for a
// test that waited for it in vain: what the instance applied, the
// rollout, and what the hub holds of the instance's reports.
func (f *fixture) diagnose(w *client.Watcher) string {
	ctx, cancel := context.WithTimeout(context.Background(), poll.Patience)
	defer cancel()
	out := fmt.Sprintf("the instance applied v%d; rollout %+v", w.Current().Version, f.state())
	out += "; " + f.readyz()
	sts, err := f.p.Distributor.Status(ctx)
	out += fmt.Sprintf("; status (err %v):", err)
	for _, st := range sts {
		out += fmt.Sprintf(" %s v%d %d/%d", st.Config, st.Latest.Version, st.OnLatest, st.Instances)
	}
	sums, err := f.p.Distributor.Summaries(ctx, checkout)
	if err != nil {
		return out + fmt.Sprintf("; summaries: %v", err)
	}
	for _, s := range sums {
		out += fmt.Sprintf("; %s's summary at %s (stored %s ago): %d live", s.Region, s.At.Format(time.StampMilli), time.Since(s.Stored).Round(time.Millisecond), s.Live)
		for _, g := range s.Groups {
			out += fmt.Sprintf(", v%d healthy %t %v", g.Version, g.Healthy, g.Instances)
		}
	}
	rs, err := f.p.Distributor.Reports(ctx, checkout)
	if err != nil {
		return out + fmt.Sprintf("; reports: %v", err)
	}
	for _, r := range rs {
		out += fmt.Sprintf("; report of %s: v%d at %s", r.Instance, r.Version, r.At.Format(time.StampMilli))
	}
	return out
}

// TestHealthHaltCounted: when the canary cohort turns unhealthy on a new
// version, the controller halts, and the metrics and the config page say why.
func TestHealthHaltCounted(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		policy := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "canary", Percent: 50, Hold: cuecast.Duration(time.Hour)},
			{Name: "all", Percent: 100},
		}}}
		f := start(t, fixtureOptions{policies: policy})
		// Two instances in the canary's buckets (below 50) and two outside.
		var in, out []string
		for i := 0; len(in) < 2 || len(out) < 2; i++ {
			id := fmt.Sprintf("checkout-%d", i)
			if cuecast.Cohort(checkout.Namespace(), id) < 50 {
				if len(in) < 2 {
					in = append(in, id)
				}
			} else if len(out) < 2 {
				out = append(out, id)
			}
		}
		for _, id := range append(in, out...) {
			// Unhealthy on v2: the bad change.
			var w atomic.Pointer[client.Watcher]
			health := func() cuecast.Health {
				if cur := w.Load(); cur != nil && cur.Current().Version == 2 {
					return cuecast.Health{Healthy: false, Detail: "error rate 40%"}
				}
				return cuecast.Health{Healthy: true}
			}
			w.Store(f.watch(checkout, id, client.WithHealth(health)))
		}
		f.waitRollout()
		halts := `cuecast_rollout_halts_total{cause="unhealthy"}`
		// OPERATIONS.md's alert is increase(cuecast_rollout_halts_total[10m]) > 0:
		// the scrape before the first halt must hold the series at 0, or the
		// first halt has nothing to increase from (it appeared only at 1).
		if v, ok := scrape(t, f.base)[halts]; !ok || v != 0 {
			t.Errorf("before any halt: %s = %v (present %t), want 0", halts, v, ok)
		}
		f.setAmount("9_000_000")
		poll.Until(t, "the unhealthy canary halted and counted", poll.Patience, func() (bool, string) {
			m := scrape(t, f.base)
			return m[halts] == 1 && m[`cuecast_rollouts{state="halted"}`] == 1,
				fmt.Sprintf("%s = %v, halted rollouts %v", halts, m[halts], m[`cuecast_rollouts{state="halted"}`])
		})
		type configView struct {
			Rollout struct {
				State  string
				Reason string
				Stages []struct {
					Name      string
					Instances int
					Unhealthy int
				}
			}
			Audit []rollout.AuditEntry
		}
		// The controller halts on the first unhealthy report from the cohort;
		// the other canary instance may not have reported v2 yet (reports follow
		// an apply by 0.5-1.5 s), so one or both are unhealthy on the page,
		// once its sample of the fleet has them (every 50 ms here), and until
		// the reverted instances report v1 again.
		var cv configView
		poll.Until(t, "the page showing the unhealthy canary", poll.Patience, func() (bool, string) {
			_, body := get(t, f.base+"/api/configs/"+string(checkout))
			cv = configView{}
			if err := json.Unmarshal([]byte(body), &cv); err != nil {
				t.Fatal(err)
			}
			st := cv.Rollout.Stages
			return len(st) == 2 && st[0].Name == "canary" && st[0].Instances >= 1 && st[0].Instances <= 2 &&
				st[0].Unhealthy >= 1 && st[0].Unhealthy <= st[0].Instances, fmt.Sprintf("stages %+v", st)
		})
		if cv.Rollout.State != "halted" || !strings.Contains(cv.Rollout.Reason, "unhealthy") {
			t.Errorf("rollout %+v, want halted for unhealthy instances", cv.Rollout)
		}
		if len(cv.Audit) == 0 || cv.Audit[0].Action != "halt" {
			t.Errorf("audit %+v, want the halt first", cv.Audit)
		}
	})
}

// TestWebhookWakesTailer: a signed GitHub push at /hooks/github makes the
// tailer poll now; an unsigned one is refused. The tailer here polls once an
// hour, so only the webhook can bring the commit in.
func TestWebhookWakesTailer(t *testing.T) {
	const secret = "hook-secret"
	f := start(t, fixtureOptions{interval: time.Hour, webhookSecret: secret})
	target := `cuecast_config_target_version{config="payments/checkout"}`
	poll.Until(t, "v1 published", poll.Patience, func() (bool, string) {
		m := scrape(t, f.base)
		return m[target] == 1, fmt.Sprintf("target %v", m[target])
	})
	f.setAmount("7_000_000")
	body := `{"ref":"refs/heads/main"}`
	hook := func(sig string) int {
		req, _ := http.NewRequest(http.MethodPost, f.base+"/hooks/github", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "push")
		if sig != "" {
			req.Header.Set("X-Hub-Signature-256", sig)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := hook(""); code != http.StatusUnauthorized {
		t.Errorf("unsigned webhook: %d, want 401", code)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	if code := hook("sha256=" + hex.EncodeToString(mac.Sum(nil))); code != http.StatusAccepted {
		t.Fatalf("signed webhook: %d, want 202", code)
	}
	poll.Until(t, "v2 published after the webhook", poll.Patience, func() (bool, string) {
		m := scrape(t, f.base)
		return m[target] == 2, fmt.Sprintf("target %v", m[target])
	})
}
