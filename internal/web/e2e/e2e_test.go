//go:build e2e

// Package e2e drives the dashboard in a real browser: it starts `cuecast
// serve` with its operations server, opens a config's page in headless
// Chromium, commits a change, and watches the page show the new version and
// its coverage reach 100% without a reload.
//
// It runs under `make e2e` (build tag e2e), which installs Debian's chromium
// when it is missing. Chromium is found at $CUECAST_CHROMIUM, /usr/bin/chromium
// or on $PATH; the test is skipped, saying so, only when there is none. A
// screenshot of each page (config, a version's diff, overview, overview
// filtered, a halted rollout, a flag set's flags) goes to $CUECAST_ARTIFACTS (default: the
// test's temp directory).
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

const (
	checkout      = cuecast.ConfigPath("payments/checkout")
	operatorToken = "e2e-operator-token"
)

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CUECAST_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("e2e: no Chromium: not at $CUECAST_CHROMIUM, /usr/bin/chromium, nor chromium/chromium-browser/google-chrome on $PATH; " +
		"`make e2e` installs Debian's chromium with apt-get when it can (as root)")
	return ""
}

// stagesRE matches the payments namespace's rollout stages and consistency
// in configs-example's manifest.
var (
	stagesRE      = regexp.MustCompile(`(?s)(namespaces: payments: \{.*?)rollout: stages: \[.*?\n\t\]`)
	consistencyRE = regexp.MustCompile(`(namespaces: payments: \{[^}]*?)consistency: "strict"`)
)

// exampleRepo is configs-example in a Git repository, with payments rolled
// out to everyone at once (the example holds its canary for five minutes).
func exampleRepo(t *testing.T) *gittest.Repo {
	t.Helper()
	repo := gittest.New(t)
	repo.CopyDir(filepath.Join("..", "..", "..", "configs-example"))
	manifest := filepath.Join(repo.Dir, "cuecast.cue")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	m := stagesRE.ReplaceAllString(string(b), `${1}rollout: stages: [{name: "all", percent: 100}]`)
	m = consistencyRE.ReplaceAllString(m, `${1}consistency: "relaxed"`)
	if m == string(b) || !strings.Contains(m, `rollout: stages: [{name: "all", percent: 100}]`) {
		t.Fatalf("could not rewrite the payments rollout in %s", manifest)
	}
	repo.Write(map[string]string{"cuecast.cue": m})
	repo.Commit("configs: the example, payments rolled out at once")
	return repo
}

// setAmount commits a new max_amount_minor for payments/checkout.
func setAmount(t *testing.T, repo *gittest.Repo, amount string) string {
	t.Helper()
	path := filepath.Join(repo.Dir, "payments", "checkout", "checkout.cue")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^max_amount_minor: .*$`)
	return repo.CommitFiles("checkout: max amount "+amount, map[string]string{
		"payments/checkout/checkout.cue": re.ReplaceAllString(string(b), "max_amount_minor: "+amount),
	})
}

func TestDashboardShowsRolloutLive(t *testing.T) {
	chromium := findChromium(t)
	repo := exampleRepo(t)
	natsAddr, httpAddr := natstest.FreeAddr(t), natstest.FreeAddr(t)
	base := "http://" + httpAddr

	// serve, exactly as an operator starts it.
	ctx, cancel := context.WithCancel(context.Background())
	io, _, errOut := iostreams.Test()
	served := make(chan int, 1)
	data := t.TempDir()
	go func() {
		served <- cli.Main(ctx, []string{"serve", "--repo", repo.Dir, "--data", data,
			"--listen", natsAddr, "--http", httpAddr, "--interval", "100ms"}, io,
			func(k string) string {
				if k == "CUECAST_OPERATOR_TOKEN" {
					return operatorToken
				}
				return ""
			})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-served; code != 0 || t.Failed() {
			t.Logf("serve exited %d; its log:\n%s", code, errOut.String())
		}
	})

	// serve writes the keys file before it signs anything; the services
	// read it at start, as a deployment that waits for serve would.
	keys := filepath.Join(data, distributor.TrustedKeysFile)
	poll.Until(t, "serve's trusted-keys file", 30*time.Second, func() (bool, string) {
		_, err := os.Stat(keys)
		return err == nil, fmt.Sprint(err)
	})
	// Three service instances.
	for i := range 3 {
		nc, err := nats.Connect("nats://"+natsAddr, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		// The one documented step: the keys file serve writes.
		natstest.Watch(t, nc, checkout, []client.Option{client.WithInstance(fmt.Sprintf("checkout-%d", i+1)),
			client.WithTrustedKeysFile(keys)}, client.LastKnownGood(filepath.Join(t.TempDir(), "lkg")))
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1600),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer bcancel()

	page := base + "/configs/" + string(checkout)
	poll.Until(t, "serve answering", 30*time.Second, func() (bool, string) {
		c, err := net.Dial("tcp", httpAddr)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	if err := chromedp.Do(bctx, chromedp.Navigate(page)); err != nil {
		t.Fatalf("open %s: %v", page, err)
	}
	text := func(js string) string {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			return "error: " + err.Error()
		}
		return s
	}
	shown := func() string {
		return text(`(document.getElementById('cfg-version')?.textContent || '-') + ' ' +
			(document.getElementById('cfg-coverage')?.textContent || '-') + ' ' +
			(document.querySelector('.cov .covtext')?.textContent || '-')`)
	}
	poll.Until(t, "the page showing v1 on all three instances", 60*time.Second, func() (bool, string) {
		s := shown()
		return s == "v1 100% 3/3 instances on v1", s
	})
	// A marker that a reload would wipe out.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.cuecastE2E = true`)); err != nil {
		t.Fatal(err)
	}

	sha := setAmount(t, repo, "2_500_000")
	poll.Until(t, "the page showing v2 everywhere", 60*time.Second, func() (bool, string) {
		s := shown()
		return s == "v2 100% 3/3 instances on v2", s
	})
	if got := text(`String(window.cuecastE2E === true)`); got != "true" {
		t.Errorf("the page reloaded (marker %q); it must update by server-sent events", got)
	}
	if got := text(`document.querySelector('#chart polyline[data-version="2"]') ? 'yes' : 'no'`); got != "yes" {
		t.Errorf("no propagation line for v2 in the chart")
	}
	if got := text(`document.querySelector('tr.current')?.textContent || ''`); !strings.Contains(got, cuecast.ShortCommit(sha)) {
		t.Errorf("current version row %q does not name commit %s", got, cuecast.ShortCommit(sha))
	}
	if got := text(`document.getElementById('conn').textContent`); got != "live" {
		t.Errorf("connection badge %q, want live", got)
	}

	// One time format everywhere: every time shown is UTC, written alike.
	if got := text(`[...document.querySelectorAll('time')].map(e => e.textContent).filter(s => !/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/.test(s)).join('|') || 'ok'`); got != "ok" {
		t.Errorf("times not in the one format: %q", got)
	}
	dir := os.Getenv("CUECAST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		shot := filepath.Join(dir, name)
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", shot)
	}
	screenshot("dashboard-config.png")

	// v2's compiled content and its diff against v1, on the page.
	if got := text(`(() => { document.querySelector('button[data-show="2"]').click(); return 'clicked'; })()`); got != "clicked" {
		t.Fatalf("open v2's content: %s", got)
	}
	poll.Until(t, "v2's diff against v1", 30*time.Second, func() (bool, string) {
		s := text(`document.getElementById('content-v2')?.textContent || '-'`)
		return strings.Contains(s, "v2 compared with v1") && strings.Contains(s, "max_amount_minor") &&
			strings.Contains(s, "5000000") && strings.Contains(s, "2500000"), s
	})
	screenshot("dashboard-version-diff.png")

	// The overview lists the config with its new version, also live.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the overview showing v2", 30*time.Second, func() (bool, string) {
		s := text(`document.querySelector('tr[data-config="payments/checkout"] .version')?.textContent || '-'`)
		return s == "v2", s
	})
	screenshot("dashboard-overview.png")

	// The filter: only the configs matching it.
	visible := func() string {
		return text(`[...document.querySelectorAll('tr[data-config]')].map(r => r.dataset.config).join(',')`)
	}
	if got := text(`(() => { const s = document.getElementById('search'); s.value = 'ranking'; s.dispatchEvent(new Event('input')); return 'typed'; })()`); got != "typed" {
		t.Fatalf("type in the filter: %s", got)
	}
	poll.Until(t, "the overview filtered to search/ranking", 10*time.Second, func() (bool, string) {
		s := visible()
		return s == "search/ranking", s
	})
	screenshot("dashboard-overview-filtered.png")
	if got := text(`(() => { const s = document.getElementById('search'); s.value = ''; s.dispatchEvent(new Event('input')); return 'cleared'; })()`); got != "cleared" {
		t.Fatalf("clear the filter: %s", got)
	}

	// An operator halts search/ranking, which holds in its canary stage for
	// five minutes (the example's policy): first with a wrong token, which
	// changes nothing, then with the right one.
	ranking := base + "/configs/search/ranking"
	if err := chromedp.Do(bctx, chromedp.Navigate(ranking)); err != nil {
		t.Fatal(err)
	}
	state := func() string { return text(`document.querySelector('#rollout .state')?.textContent || '-'`) }
	poll.Until(t, "search/ranking holding, with the actions offered", 30*time.Second, func() (bool, string) {
		s := state() + " actions hidden=" + text(`String(document.getElementById('actions').hidden)`)
		return s == "holding actions hidden=false", s
	})
	act := func(token, action string) string {
		js := fmt.Sprintf(`(() => {
			document.getElementById('action-result').textContent = '';
			document.getElementById('token').value = %q;
			document.getElementById('actor').value = 'e2e';
			document.getElementById('reason').value = 'e2e: error rate up';
			document.querySelector('#actions button[data-action=%q]').click();
			return 'clicked';
		})()`, token, action)
		if got := text(js); got != "clicked" {
			t.Fatalf("click %s: %s", action, got)
		}
		var result string
		poll.Until(t, action+" answered", 30*time.Second, func() (bool, string) {
			result = text(`document.getElementById('action-result').textContent`)
			return result != "" && !strings.HasSuffix(result, "…"), result
		})
		return result
	}
	if got := act("not-the-token", "halt"); !strings.Contains(got, "bearer token") {
		t.Errorf("halt with a wrong token: %q, want the 401 message", got)
	}
	if s := state(); s != "holding" {
		t.Errorf("after a refused halt the rollout is %q, want holding", s)
	}
	if got := act(operatorToken, "halt"); got != "halt: done" {
		t.Fatalf("halt with the token: %q", got)
	}
	poll.Until(t, "the page showing the halt and its audit", 30*time.Second, func() (bool, string) {
		s := state() + " | " + text(`[...document.querySelectorAll('section.panel')].find(p => p.querySelector('h2')?.textContent === 'Audit')?.querySelector('tbody tr')?.textContent || '-'`)
		return strings.HasPrefix(s, "halted | ") && strings.Contains(s, "web:e2e") && strings.Contains(s, "e2e: error rate up"), s
	})
	// Its named stage is shown as the instances it names.
	if got := text(`[...document.querySelectorAll('.stage-head')].map(e => e.textContent).join(' | ')`); !strings.Contains(got, "canary-hosts instances search-canary-1, search-canary-2") {
		t.Errorf("stages %q: want canary-hosts shown with the instances it names", got)
	}
	screenshot("dashboard-halted.png")

	// Rollback asks first: declined, nothing is sent; accepted, it is.
	asked := func(answer bool) string {
		return text(fmt.Sprintf(`(() => { window.cuecastAsked = ''; window.confirm = m => { window.cuecastAsked = m; return %t; }; return 'ok'; })()`, answer))
	}
	asked(false)
	if got := act(operatorToken, "rollback"); got != "rollback: cancelled" {
		t.Errorf("rollback declined: %q, want cancelled", got)
	}
	if got := text(`window.cuecastAsked`); !strings.Contains(got, "Roll search/ranking back") {
		t.Errorf("rollback confirmation %q, want it to name the config", got)
	}
	if s := state(); s != "halted" {
		t.Errorf("after a declined rollback the rollout is %q, want halted", s)
	}
	asked(true)
	if got := act(operatorToken, "rollback"); got == "rollback: cancelled" || !strings.HasPrefix(got, "rollback: ") {
		t.Errorf("rollback accepted: %q, want the server's answer", got)
	}

	// A flag set's page shows its flags: the switch, the rules in order and
	// the current rollout (issue 19).
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/configs/growth/flags")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "growth/flags showing its flags", 30*time.Second, func() (bool, string) {
		s := text(`document.querySelector('#flags tr[data-flag="new-checkout"]')?.textContent || '-'`)
		return strings.Contains(s, "new-checkout") && strings.Contains(s, "staff: email endsWith") &&
			strings.Contains(s, "on 20% · off 80%"), s
	})
	screenshot("dashboard-flags.png")

	// The edit control (issue 35): raise new-checkout to half the users.
	// The preview names where the weight is written and the compiled diff
	// and commits nothing; the submit commits, links the commit, and the
	// page then shows the new rollout.
	before := repo.Head()
	fill := fmt.Sprintf(`(() => {
		document.querySelector('button[data-edit-flag="new-checkout"]').click();
		const set = (id, v) => { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); };
		set('edit-token', %q); set('edit-actor', 'e2e'); set('edit-rollout', '50'); set('edit-reason', 'e2e: half the users');
		document.getElementById('edit-preview-button').click();
		return String(document.getElementById('edit').hidden);
	})()`, operatorToken)
	if got := text(fill); got != "false" {
		t.Fatalf("the edit control is hidden (%s): the set API is on with the operator token", got)
	}
	poll.Until(t, "the preview", 60*time.Second, func() (bool, string) {
		s := text(`(document.getElementById('edit-diff')?.textContent || '-') + ' | ' + document.getElementById('edit-result').textContent`)
		return strings.Contains(s, "preview: nothing written yet"), s
	})
	if got := text(`getComputedStyle(document.getElementById('edit-path-label')).display + ' ' + getComputedStyle(document.getElementById('edit-rollout-label')).display`); got != "none flex" {
		t.Errorf("flag mode shows path %q, want only the flag's fields", got)
	}
	if got := text(`[...document.querySelectorAll('#edit-diff .edit-origin')].map(e => e.textContent).join(',')`); got != "growth/flags/flags.cue:18,growth/flags/flags.cue:18" {
		t.Errorf("preview origins %q, want both weights at growth/flags/flags.cue:18", got)
	}
	if got := text(`document.getElementById('edit-diff').textContent`); !strings.Contains(got, `flags["new-checkout"].fallthrough.rollout.weights[0].weight`) && !strings.Contains(got, "weights[0].weight") ||
		!strings.Contains(got, "20000") || !strings.Contains(got, "50000") || !strings.Contains(got, "compiled diff of growth/flags") {
		t.Errorf("preview %q: want the weights' compiled diff, 20000 to 50000", got)
	}
	if repo.Head() != before {
		t.Fatalf("the preview committed: main at %s", repo.Head())
	}
	screenshot("dashboard-edit-preview.png")
	if got := text(`(() => { document.getElementById('edit-submit').click(); return 'clicked'; })()`); got != "clicked" {
		t.Fatalf("submit: %s", got)
	}
	var link string
	poll.Until(t, "the commit linked", 60*time.Second, func() (bool, string) {
		link = text(`document.getElementById('edit-link')?.textContent || document.getElementById('edit-result').textContent`)
		return strings.HasPrefix(link, "commit "), link
	})
	head := repo.Head()
	if head == before || link != "commit "+head[:12]+" on main" {
		t.Errorf("linked %q, main at %s (was %s)", link, head, before)
	}
	poll.Until(t, "growth/flags serving half the users", 60*time.Second, func() (bool, string) {
		s := text(`document.querySelector('#flags tr[data-flag="new-checkout"]')?.textContent || '-'`)
		return strings.Contains(s, "on 50% · off 50%"), s
	})
	screenshot("dashboard-edit-done.png")

	// The same change again: every value already as asked, so the preview
	// says unchanged and nothing is committed (no empty commit).
	text(fill)
	poll.Until(t, "the unchanged answer", 60*time.Second, func() (bool, string) {
		s := text(`document.getElementById('edit-result').textContent`)
		return strings.HasPrefix(s, "unchanged: "), s
	})
	if repo.Head() != head {
		t.Errorf("an unchanged edit moved main to %s", repo.Head())
	}

	// Any value by its path: the preview names its origin, a literal.
	valueMode := `(() => {
		document.getElementById('edit-value-mode').click();
		const set = (id, v) => { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); };
		set('edit-path', 'flags."results-per-page".variants.many'); set('edit-value', '60');
		document.getElementById('edit-preview-button').click();
		return getComputedStyle(document.getElementById('edit-path-label')).display;
	})()`
	if got := text(valueMode); got != "flex" {
		t.Fatalf("value mode: path field %q", got)
	}
	poll.Until(t, "the value's preview", 60*time.Second, func() (bool, string) {
		s := text(`[...document.querySelectorAll('#edit-diff tbody tr')].map(e => e.textContent).join(' | ') + ' | ' + document.getElementById('edit-result').textContent`)
		return strings.Contains(s, "literalgrowth/flags/flags.cue:23") && strings.Contains(s, "preview: nothing written yet"), s
	})
	screenshot("dashboard-edit-value.png")
}
