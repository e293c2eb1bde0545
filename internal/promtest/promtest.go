// Package promtest runs a real Prometheus server for tests: Debian's
// prometheus binary (make test unpacks it into bin/prometheus-deb when
// /usr/bin/prometheus is missing), listening on 127.0.0.1 with its store in
// t.TempDir(), scraping the targets a test gives it through a file_sd
// file it rewrites. A test without a Prometheus binary skips, saying
// where it looked.
package promtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// Binary finds the prometheus binary: $CUECAST_PROMETHEUS,
// /usr/bin/prometheus, or the one `make test` unpacks into
// bin/prometheus-deb; "" and where it looked when there is none.
func Binary() (string, string) {
	if p := os.Getenv("CUECAST_PROMETHEUS"); p != "" {
		return p, ""
	}
	tried := []string{"/usr/bin/prometheus"}
	if root, ok := moduleRoot(); ok {
		tried = append(tried, filepath.Join(root, "bin", "prometheus-deb", "usr", "bin", "prometheus"))
	}
	for _, p := range tried {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, ""
		}
	}
	return "", fmt.Sprintf("no prometheus binary: $CUECAST_PROMETHEUS is unset and none at %v (make test unpacks Debian's prometheus package)", tried)
}

// moduleRoot is the nearest directory at or above the working directory
// (a test's package directory) that holds a go.mod. The source file's own
// path cannot serve: make test builds with -trimpath, which makes it
// relative to the module.
func moduleRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Server is a running Prometheus.
type Server struct {
	t       testing.TB
	URL     string
	API     v1.API
	dir     string
	targets string
	cmd     *exec.Cmd
	log     *os.File
	once    sync.Once
}

// Start runs a Prometheus scraping targets (host:port) every scrape, and
// waits until its API answers. SetTargets changes the targets, which
// Prometheus applies within 5 s (its scrape manager's pace): a test that
// knows its targets passes them here. It skips t when no binary can be
// found; t.Cleanup stops it.
func Start(t testing.TB, scrape time.Duration, targets ...string) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{t: t, dir: dir, targets: filepath.Join(dir, "targets.json")}
	s.SetTargets(targets)
	conf := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: service
    file_sd_configs:
      - files: [%[2]q]
        refresh_interval: 1s
`, model.Duration(scrape), s.targets)
	s.run(conf)
	return s
}

// StartConfig runs a Prometheus with conf as its prometheus.yml, as a
// reader would write it (a document's own, to test that it works), and
// waits until its API answers. SetTargets does nothing for it. It skips t
// when no binary can be found; t.Cleanup stops it.
func StartConfig(t testing.TB, conf string) *Server {
	t.Helper()
	dir := t.TempDir()
	s := &Server{t: t, dir: dir, targets: filepath.Join(dir, "targets.json")}
	s.run(conf)
	return s
}

// run starts the binary with conf in s.dir.
func (s *Server) run(conf string) {
	t := s.t
	t.Helper()
	bin, why := Binary()
	if bin == "" {
		t.Skip(why)
	}
	dir := s.dir
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := natstest.FreeAddr(t)
	s.URL = "http://" + addr
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.log = log
	s.cmd = exec.Command(bin, "--config.file="+confPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	c, err := api.NewClient(api.Config{Address: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	s.API = v1.NewAPI(c)
	poll.Until(t, "prometheus answering", poll.Patience, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := s.API.Buildinfo(ctx)
		return err == nil, fmt.Sprint(err)
	})
}

// SetTargets replaces the scraped targets (host:port) by rewriting the
// file_sd file, atomically.
func (s *Server) SetTargets(targets []string) {
	s.t.Helper()
	if targets == nil {
		targets = []string{}
	}
	b, err := json.Marshal([]map[string]any{{"targets": targets}})
	if err != nil {
		s.t.Fatal(err)
	}
	tmp := s.targets + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, s.targets); err != nil {
		s.t.Fatal(err)
	}
}

// WaitUp waits until Prometheus has scraped each target successfully.
func (s *Server) WaitUp(targets []string) {
	s.t.Helper()
	poll.Until(s.t, fmt.Sprintf("prometheus scraping %d targets", len(targets)), poll.Patience, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		res, err := s.API.Targets(ctx)
		if err != nil {
			return false, err.Error()
		}
		up := map[string]bool{}
		for _, at := range res.Active {
			if at.Health == v1.HealthGood {
				up[string(at.Labels["instance"])] = true
			}
		}
		for _, tg := range targets {
			if !up[tg] {
				return false, fmt.Sprintf("%s not up (%d up)", tg, len(up))
			}
		}
		return true, ""
	})
}

// WaitScraped waits until Prometheus has scraped every active target
// after since.
func (s *Server) WaitScraped(since time.Time) {
	s.t.Helper()
	poll.Until(s.t, "prometheus scraping every target after "+since.Format(time.RFC3339Nano), poll.Patience, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		res, err := s.API.Targets(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, at := range res.Active {
			if !at.LastScrape.After(since) || at.Health != v1.HealthGood {
				return false, fmt.Sprintf("%s last scraped %s (%s)", at.ScrapeURL, at.LastScrape.Format(time.RFC3339Nano), at.Health)
			}
		}
		return len(res.Active) > 0, "no target"
	})
}

// Stop kills the server and waits for it to exit; a stopped server's API
// refuses connections.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		var ee *exec.ExitError
		if err := s.cmd.Wait(); err != nil && !errors.As(err, &ee) {
			s.t.Errorf("prometheus: %v", err)
		}
		_ = s.log.Close()
	})
}

// Slow returns the URL of a proxy to s that holds every request for delay
// before passing it on, as a loaded Prometheus answers late: a test of a
// query timeout gives it a delay between the timeout that fails and the
// one that does not. A request its client gives up on is dropped.
func (s *Server) Slow(delay time.Duration) string {
	s.t.Helper()
	target, err := url.Parse(s.URL)
	if err != nil {
		s.t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if r.Context().Err() == nil { // else the client gave up: nobody to tell
			s.t.Logf("slow prometheus proxy: %v", err)
			w.WriteHeader(http.StatusBadGateway)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			proxy.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	s.t.Cleanup(srv.Close)
	return srv.URL
}
