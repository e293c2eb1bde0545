//go:build e2e

package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"
	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/cuecast/cuecast/internal/nodetest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestOFREPBrowser runs testdata/evaluation.feature through the web SDK
// (@openfeature/web-sdk) and OpenFeature's @openfeature/ofrep-web-provider
// in headless Chromium, against `cuecast agent --ofrep`, the page served
// from the OFREP server's origin (testdata/ofrep/web.html); then a new
// version of the set reaches the page by the provider's polling, after
// polls answered 304 by the ETag. Build tag e2e: `make e2e`. Chromium is
// found at $CUECAST_CHROMIUM, /usr/bin/chromium or on $PATH; the test is
// skipped, saying so, only when there is none, or no node and npm.
func TestOFREPBrowser(t *testing.T) {
	chromium := os.Getenv("CUECAST_CHROMIUM")
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if chromium == "" {
			chromium, _ = exec.LookPath(p)
		}
	}
	if chromium == "" {
		t.Skip("no Chromium at $CUECAST_CHROMIUM, /usr/bin/chromium or on $PATH")
	}
	dir := nodetest.Install(t)
	content := suiteFlags(t)
	e := newEnv(t)
	e.ship(1, content)
	agent, err := url.Parse(e.agentOFREP(t, 1))
	if err != nil {
		t.Fatal(err)
	}

	// The page, the packages and OFREP share one origin, as behind a
	// reverse proxy; the proxy counts the bulk polls answered 304.
	var notModified atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(agent)
	proxy.ModifyResponse = func(res *http.Response) error {
		if res.StatusCode == http.StatusNotModified {
			notModified.Add(1)
		}
		return nil
	}
	page := readFile(t, "testdata/ofrep/web.html")
	mux := http.NewServeMux()
	mux.Handle("/ofrep/", proxy)
	mux.Handle("/node_modules/", http.FileServer(http.Dir(dir)))
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	actx, acancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()))...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(bctx, chromedp.Poll[string](`document.title === 'ready' || document.title.startsWith('failed') ? document.title : false`))
	if err != nil || title != "ready" {
		t.Fatalf("the page: %q, %v", title, err)
	}
	browser := remote{do: func(req remoteRequest) (remoteDetails, error) {
		b, _ := json.Marshal(req)
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string]("window.cuecastEval("+string(b)+")", chromedp.EvalAwaitPromise))
		if err != nil {
			return remoteDetails{}, err
		}
		var d remoteDetails
		err = json.Unmarshal([]byte(s), &d)
		return d, err
	}}

	runSpecSuite(t, browser)

	// Polling with the context unchanged: 304s until the new version.
	if _, _, err := browser.evaluate("string", "string-flag", "x", of.EvaluationContext{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[int](`(window.cuecastChanges = []).length`)); err != nil {
		t.Fatal(err)
	}
	seen := notModified.Load()
	poll.Until(t, "a poll answered 304", poll.Patience, func() (bool, string) {
		return notModified.Load() > seen, fmt.Sprint(notModified.Load(), " 304s")
	})
	e.ship(2, strings.Replace(content, `"defaultVariant":"greeting"`, `"defaultVariant":"parting"`, 1))
	poll.Until(t, "PROVIDER_CONFIGURATION_CHANGED naming string-flag", poll.Patience, func() (bool, string) {
		changed, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`window.cuecastChanges`))
		return err == nil && strings.Contains(strings.Join(changed, " "), string(cfg)+"/string-flag"), fmt.Sprint(changed, err)
	})
	if v, d, err := browser.evaluate("string", "string-flag", "x", of.EvaluationContext{}); v != "bye" || d.FlagMetadata["version"] != 2.0 {
		t.Errorf("string-flag after version 2: %v %v %v; want bye from version 2", v, d, err)
	}
}
