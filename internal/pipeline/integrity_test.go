package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/tailer"
)

// startHTTP is start with the operations server on a free port.
func startHTTP(t *testing.T, repo *gittest.Repo, data string) *fixture {
	t.Helper()
	p, stop := pipelinetest.Run(t, pipeline.Config{
		Repo: repo.Dir, DataDir: data, HTTP: "127.0.0.1:0", SampleInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	return &fixture{t: t, repo: repo, data: data, p: p, stop: stop}
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	// Bounded: a server that takes the connection and never answers fails
	// the test rather than hanging it.
	resp, err := (&http.Client{Timeout: convergeBound}).Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// streamBlocks returns the block files of the CUECAST stream under a data
// directory.
func streamBlocks(t *testing.T, data string) (dir string, blocks []string) {
	t.Helper()
	dir = filepath.Join(data, "jetstream", "jetstream", "$G", "streams", "CUECAST")
	blocks, err := filepath.Glob(filepath.Join(dir, "msgs", "*.blk"))
	if err != nil || len(blocks) == 0 {
		t.Fatalf("no block files in %s (%v)", dir, err)
	}
	return dir, blocks
}

// lastBlock is the newest message block of the CUECAST stream under data.
func lastBlock(t *testing.T, data string) string {
	t.Helper()
	_, blocks := streamBlocks(t, data)
	return blocks[len(blocks)-1]
}

// TestDamagedStreamRefusedAndRepaired: versions published, serve stopped,
// the CUECAST stream's files damaged; at restart the tailer must refuse to
// publish (error, metric, /readyz 503) instead of numbering from what the
// stream still holds, and `repair` must continue above every number ever
// published, re-deploy, and audit.
func TestDamagedStreamRefusedAndRepaired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, data string)
	}{
		{"truncated", func(t *testing.T, data string) {
			b := lastBlock(t, data)
			fi, err := os.Stat(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(b, fi.Size()/3); err != nil {
				t.Fatal(err)
			}
		}},
		{"bit-flipped", func(t *testing.T, data string) {
			b := lastBlock(t, data)
			buf, err := os.ReadFile(b)
			if err != nil {
				t.Fatal(err)
			}
			// Flip bits inside message payloads only (the compiled JSON,
			// `"value":N`), from the first third of the block on: the
			// records' checksums no longer match. Flipping a record's
			// sequence field instead can make nats-server v2.15.2 loop at
			// start filling a "hole" of billions of sequences.
			at := bytes.Index(buf[len(buf)/3:], []byte(`"value":`))
			if at < 0 {
				t.Fatalf("no payload found to flip in %s", b)
			}
			for i := len(buf)/3 + at; i < len(buf); {
				buf[i+1] ^= 0x20 // "value" ▶ "Value"
				next := bytes.Index(buf[i+1:], []byte(`"value":`))
				if next < 0 {
					break
				}
				i += 1 + next
			}
			if err := os.WriteFile(b, buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted", func(t *testing.T, data string) {
			dir, _ := streamBlocks(t, data)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			repo, cfgs := smallRepo(t)
			a := cfgs[0]
			data := t.TempDir()
			f := start(t, repo, data)
			var head string
			for i := 1; i <= 12; i++ {
				head = repo.CommitFiles(fmt.Sprintf("a: value %d", i), map[string]string{
					string(a) + "/c.cue": fmt.Sprintf("package a\n\nvalue: %d\n", i),
				})
			}
			f.p.Tailer.Wake()
			f.waitCursor(head)
			published := f.versions(a)[0].Version // 13
			f.stop()

			tc.damage(t, data)

			f = startHTTP(t, repo, data)
			if v, err := f.p.Distributor.Latest(ctx, a); err == nil && v.Version >= published {
				t.Fatalf("the damage lost nothing: the stream still holds v%d", v.Version)
			}
			change := repo.CommitFiles("a: value 100", map[string]string{string(a) + "/c.cue": "package a\n\nvalue: 100\n"})
			f.p.Tailer.Wake()
			poll.Until(t, "publishing refused", poll.Patience, func() (bool, string) {
				err := f.p.Tailer.Inconsistent()
				return errors.Is(err, tailer.ErrInconsistent), fmt.Sprint(err)
			})
			base := "http://" + f.p.HTTPAddr()
			poll.Until(t, "/readyz 503", poll.Patience, func() (bool, string) {
				code, body := get(t, base+"/readyz")
				return code == http.StatusServiceUnavailable && strings.Contains(body, "repair"), fmt.Sprint(code, body)
			})
			if _, body := get(t, base+"/metrics"); !strings.Contains(body, "cuecast_versions_inconsistent 1") {
				t.Errorf("metrics lack cuecast_versions_inconsistent 1")
			}
			if v, err := f.p.Distributor.Latest(ctx, a); err == nil && v.Version <= published && v.Commit == change {
				t.Fatalf("the change was published as v%d, a number already published", v.Version)
			}
			f.stop()

			// The way back: rebuild from Git above every number published.
			p, err := pipeline.Start(ctx, pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Listen: "127.0.0.1:0"})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := p.Repair(ctx, "oncall", "stream damaged by the test")
			if err != nil {
				p.Close()
				t.Fatalf("repair: %v", err)
			}
			var got *tailer.Renumbered
			for i, r := range rep.Renumbered {
				if r.Config == a {
					got = &rep.Renumbered[i]
				}
			}
			if got == nil || got.Version <= published || got.Published < published {
				p.Close()
				t.Fatalf("repair renumbered %+v, want %s above v%d", rep.Renumbered, a, published)
			}
			audit, err := p.Rollout.Audit(ctx, a)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(audit); n == 0 || audit[n-1].Action != "repair" || audit[n-1].Actor != "oncall" || audit[n-1].Version != got.Version {
				t.Errorf("audit trail of %s: %+v, want a repair entry by oncall for v%d", a, audit, got.Version)
			}
			rec, err := p.Rollout.Record(ctx, a)
			if err != nil || rec.Current == nil || rec.Current.Version != got.Version {
				t.Errorf("rollout of %s after repair: %+v (%v), want v%d deployed", a, rec.Current, err, got.Version)
			}
			p.Close()

			// Publishing resumes above the repaired number.
			f = startHTTP(t, repo, data)
			next := repo.CommitFiles("a: value 101", map[string]string{string(a) + "/c.cue": "package a\n\nvalue: 101\n"})
			f.p.Tailer.Wake()
			f.waitCursor(next)
			v, err := f.p.Distributor.Latest(ctx, a)
			if err != nil || v.Version != got.Version+1 || v.Commit != next {
				t.Fatalf("after repair: latest %+v (%v), want v%d from %s", v, err, got.Version+1, short(next))
			}
			base = "http://" + f.p.HTTPAddr()
			poll.Until(t, "/readyz 200", poll.Patience, func() (bool, string) {
				code, body := get(t, base+"/readyz")
				return code == http.StatusOK, fmt.Sprint(code, body)
			})
			for _, c := range cfgs {
				if _, err := f.p.Distributor.Latest(ctx, c); err != nil {
					t.Errorf("%s has no version after repair: %v", c, err)
				}
			}
		})
	}
}

// TestDamagedStoreNamesEveryConfig: when the store lost the versions of 12
// configs, the log names every one of them with what the stream holds and
// what was published (it used to name 5 "and 7 more", never the one that
// lost 21 versions), the summary (/readyz) names the worst first, and with
// all of jetstream/ deleted the number given as published is the one that
// was (it said v20 when v21 was).
func TestDamagedStoreNamesEveryConfig(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	files := map[string]string{
		"cue.mod/module.cue": "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: pay: owners: [\"team-pay\"]\n",
	}
	var cfgs []cuecast.ConfigPath
	for c := 'a'; c <= 'l'; c++ {
		cp := cuecast.ConfigPath("pay/" + string(c))
		cfgs = append(cfgs, cp)
		files[string(cp)+"/c.cue"] = fmt.Sprintf("package %c\n\nvalue: 0\n", c)
	}
	repo.CommitFiles("Initial configs", files)
	worst := cfgs[len(cfgs)-1] // last in name order: never among the first five
	// Every other config gets a v2: the data directory's mark may be one
	// ahead of the stream, so a lone v1 is not known to be published.
	second := map[string]string{}
	for _, cp := range cfgs[:len(cfgs)-1] {
		second[string(cp)+"/c.cue"] = fmt.Sprintf("package %s\n\nvalue: 1\n", cp.Name())
	}
	repo.CommitFiles("v2 of all but one", second)
	var head string
	for i := 1; i <= 20; i++ {
		head = repo.CommitFiles(fmt.Sprintf("l: value %d", i), map[string]string{string(worst) + "/c.cue": fmt.Sprintf("package l\n\nvalue: %d\n", i)})
	}
	data := t.TempDir()
	f := start(t, repo, data)
	f.p.Tailer.Wake()
	f.waitCursor(head)
	if v := f.versions(worst)[0].Version; v != 21 {
		t.Fatalf("%s at v%d, want v21", worst, v)
	}
	f.stop()

	for _, tc := range []struct {
		name   string
		remove string // under the data directory
	}{
		{"stream deleted", filepath.Join("jetstream", "jetstream", "$G", "streams", "CUECAST")},
		{"jetstream deleted", "jetstream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(data)); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(dir, tc.remove)); err != nil {
				t.Fatal(err)
			}
			var logs syncBuf
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p, err := pipeline.Start(ctx, pipeline.Config{
				Repo: repo.Dir, Branch: "main", DataDir: dir, Listen: "127.0.0.1:0", Interval: 20 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			defer func() { cancel(); <-done }()
			poll.Until(t, "publishing refused", poll.Patience, func() (bool, string) {
				err := p.Tailer.Inconsistent()
				return err != nil, fmt.Sprint(err)
			})
			// The tailer refuses publishing first and logs each config
			// after: wait for the lines, do not read the log half written.
			poll.Until(t, "every damaged config named in the log", poll.Patience, func() (bool, string) {
				log := logs.String()
				for _, cp := range cfgs {
					want := fmt.Sprintf("config=%s stored=0 published=2 ", cp)
					if cp == worst {
						want = fmt.Sprintf("config=%s stored=0 published=21 ", cp)
					}
					if !strings.Contains(log, "version store damaged") || !strings.Contains(log, want) {
						return false, fmt.Sprintf("the log does not name %s as %q:\n%s", cp, want, log)
					}
				}
				return true, ""
			})
			if sum := p.Tailer.Inconsistent().Error(); !strings.Contains(sum, string(worst)+" holds v0 but v21 was published") {
				t.Errorf("summary %q does not name %s, which lost 21 versions", sum, worst)
			}
		})
	}
}
