package pipeline_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// runCLI runs `cuecast ARGS...` as a process to its end and returns its
// exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envCLIChild+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("cuecast %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

// TestRunbookDamagedStream runs docs/OPERATIONS.md's "A damaged version
// stream" (and, on the way, the flag table's word on --webhook-secret) as
// written, with `cuecast serve` and `cuecast repair` processes:
// versions published to a fleet, serve stopped, the stream's directory
// deleted (one of the causes the runbook names), serve started again. The
// symptoms are as listed: the log line per damaged config with stored,
// published and source, the counting line, cuecast_versions_inconsistent 1,
// /readyz 503; a commit publishes nothing and the instances keep what they
// run. Then the steps: stop serve (SIGTERM); restore a backup not older
// than the last publish (a cold copy of jetstream/, "Backups") and start
// serve: it checks again and publishes what waited. Without a backup (the
// stream deleted again): `cuecast repair --repo … --data … --reason "what
// happened"`, which prints what it did, and start serve:
// the instances move to the new numbers, which are above every one
// published, and /readyz is 200.
func TestRunbookDamagedStream(t *testing.T) {
	t.Parallel() // processes and waits on them: it overlaps the other such test
	rb, data, listen, pub := startEmbeddedRunbookServe(t)
	serve, repo, cfgs := rb.serve, rb.repo, rb.cfgs
	defer serve.stop(t)
	base := rb.base
	// OPERATIONS' flag table, --webhook-secret: without it, every webhook
	// (a signed push too) is refused with 403 saying so, and the tailer
	// still polls (the commits below are published).
	const push = `{"ref":"refs/heads/main"}`
	mac := hmac.New(sha256.New, []byte("a secret this serve was not given"))
	mac.Write([]byte(push))
	req, err := http.NewRequest(http.MethodPost, base+"/hooks/github", strings.NewReader(push))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "no webhook secret is configured on this serve") {
		t.Errorf("a signed push to a serve without --webhook-secret: %d %q, want 403 saying no secret is configured", resp.StatusCode, body)
	}

	nc, c, published := rb.publish(t, listen, pub)
	d, f := rb.d, rb.f

	// A cold backup ("Backups"): serve stopped, jetstream/ copied. Then the
	// damage: the stream's files deleted.
	serve.stop(t)
	store := filepath.Join(data, "jetstream")
	backup := filepath.Join(t.TempDir(), "jetstream")
	if err := os.CopyFS(backup, os.DirFS(store)); err != nil {
		t.Fatal(err)
	}
	damage := func() {
		t.Helper()
		if err := os.RemoveAll(filepath.Join(store, "jetstream", "$G", "streams", "CUECAST")); err != nil {
			t.Fatal(err)
		}
	}
	damage()
	rb.start(t)
	c.change(cfgs[0])
	poll.Until(t, "the symptoms: every damaged config logged, the count, the metric, /readyz 503", poll.Patience, func() (bool, string) {
		if ok, missing := rb.damageLogged(published); !ok {
			return false, missing
		}
		log := serve.proc.stderr.String()
		if !regexp.MustCompile(`msg="version store damaged: publishing refused until ` + "`cuecast repair`" + fmt.Sprintf(`" .*configs=%d\n`, len(cfgs))).MatchString(log) {
			return false, "no counting line in\n" + log
		}
		if _, body := get(t, base+"/metrics"); !strings.Contains(body, "\ncuecast_versions_inconsistent 1\n") {
			return false, "cuecast_versions_inconsistent is not 1"
		}
		return rb.refusing(t)
	})
	// "Nothing is published; instances keep what they run."
	rb.nonePublished(t)
	for _, in := range f.ins {
		if cur := in.w.Current(); cur.Version != published[in.cfg].Version || cur.Checksum != published[in.cfg].Checksum {
			t.Errorf("%s on %s v%d, want it kept on v%d", in.id, in.cfg, cur.Version, published[in.cfg].Version)
		}
	}

	// 1. Stop serve (SIGTERM). A backup not older than the last publish:
	// restore it and start serve; it checks again, and publishes what
	// waited.
	serve.stop(t)
	if err := os.RemoveAll(store); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(store, os.DirFS(backup)); err != nil {
		t.Fatal(err)
	}
	rb.start(t)
	waitCursor(t, nc, repo.Head())
	if v, err := d.Latest(t.Context(), cfgs[0]); err != nil || v.Version != published[cfgs[0]].Version+1 || v.Commit != c.last[cfgs[0]] {
		t.Fatalf("%s after the backup's restore: v%d of %s (%v), want v%d of %s", cfgs[0], v.Version, short(v.Commit), err, published[cfgs[0]].Version+1, short(c.last[cfgs[0]]))
	}
	for _, cf := range cfgs {
		if published[cf], err = d.Latest(t.Context(), cf); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "/readyz 200 after the backup's restore", poll.Patience, func() (bool, string) {
		code, body := get(t, base+"/readyz")
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
	// Without a backup: the damage again, and the runbook's step 2.
	serve.stop(t)
	damage()
	// 2. cuecast repair --repo … --data … --reason "what happened"
	// Then 3. start serve: instances move to the new numbers.
	rb.repairThenServe(t, published, "repair", "--repo", repo.Dir, "--data", data, "--reason", "stream directory deleted by the runbook test")
}

// TestRunbookRepairExternal runs docs/OPERATIONS.md's "A damaged version
// stream" with an external server, as step 2 words it: "`--nats` and its
// flags for an external server, with every replica stopped". A `serve
// --nats` replica publishes to a fleet; with it stopped, the stream is
// deleted from the server (the server itself runs on, as a cluster does);
// started again, the replica shows the symptoms (a log line per damaged
// config, /readyz 503) and publishes nothing. Then the steps: 1. stop serve
// (SIGTERM); 2. `cuecast repair --repo … --data … --nats … --reason "what
// happened"`, which prints what it did; 3. start serve: every config is
// numbered above every number published, the instances move to the new
// numbers, and /readyz is 200.
func TestRunbookRepairExternal(t *testing.T) {
	t.Parallel() // processes and waits on them: it overlaps the other such test
	srv := natstest.Start(t)
	addr := srv.Addr().String()
	repo, cfgs := smallRepo(t)
	data := t.TempDir()
	pub := sharedKey(t, data)
	serve := &supervised{name: "serve --nats", http: natstest.FreeAddr(t), expected: func(string) bool { return false }}
	serve.args = []string{"serve", "--repo", repo.Dir, "--data", data, "--nats", "nats://" + addr, "--http", serve.http, "--interval", "50ms"}
	rb := startRunbookServe(t, serve, repo, cfgs)
	defer serve.stop(t)

	nc, c, published := rb.publish(t, addr, pub)

	// The damage, every replica stopped: the stream deleted at the server.
	serve.stop(t)
	js := natstest.JetStream(t, nc)
	if err := js.DeleteStream(t.Context(), "CUECAST"); err != nil {
		t.Fatalf("delete the stream: %v", err)
	}
	rb.start(t)
	c.change(cfgs[0])
	poll.Until(t, "the symptoms: every damaged config logged, /readyz 503", poll.Patience, func() (bool, string) {
		if ok, missing := rb.damageLogged(published); !ok {
			return false, missing
		}
		return rb.refusing(t)
	})
	rb.nonePublished(t)

	// 1. Stop serve (SIGTERM). 2. cuecast repair --repo … --data … with
	// --nats, every replica stopped.
	serve.stop(t)
	// Then 3. start serve: instances move to the new numbers.
	rb.repairThenServe(t, published, "repair --nats", "--repo", repo.Dir, "--data", data, "--nats", "nats://"+addr, "--reason", "stream deleted at the external server by the runbook test")
}

// runbookServe is a serve of the runbook tests and what they watch it by.
type runbookServe struct {
	serve *supervised
	ready func() // waits until serve says it serves
	base  string // its operations server's URL
	repo  *gittest.Repo
	cfgs  []cuecast.ConfigPath
	nc    *nats.Conn               // the connection d reads by (publish)
	d     *distributor.Distributor // the version stream, read at its NATS (publish)
	f     *fleet                   // instances of every config (publish)
}

// startRunbookServe starts serve, whose args are set, and waits until it
// says it serves.
func startRunbookServe(t *testing.T, serve *supervised, repo *gittest.Repo, cfgs []cuecast.ConfigPath) *runbookServe {
	t.Helper()
	r := &runbookServe{serve: serve, base: "http://" + serve.http, repo: repo, cfgs: cfgs}
	r.ready = func() {
		t.Helper()
		poll.Until(t, "serve started", convergeBound, func() (bool, string) {
			serve.reap(t)
			return serve.ready(), serve.proc.stderr.String()
		})
	}
	r.start(t)
	return r
}

// startEmbeddedRunbookServe starts an embedded serve on a new repository
// (smallRepo) and data directory, signing with a key it returns the
// public half of (pub), and waits until it says it serves.
func startEmbeddedRunbookServe(t *testing.T) (rb *runbookServe, data, listen, pub string) {
	t.Helper()
	repo, cfgs := smallRepo(t)
	data = t.TempDir()
	pub = sharedKey(t, data)
	listen = natstest.FreeAddr(t)
	serve := &supervised{name: "serve", http: natstest.FreeAddr(t), expected: func(string) bool { return false }}
	serve.args = []string{"serve", "--repo", repo.Dir, "--data", data, "--listen", listen, "--http", serve.http, "--interval", "50ms"}
	return startRunbookServe(t, serve, repo, cfgs), data, listen, pub
}

// start starts serve and waits until it says it serves.
func (r *runbookServe) start(t *testing.T) {
	t.Helper()
	r.serve.start(t)
	r.ready()
}

// publish starts a fleet at the NATS server on addr (instances trusting
// pub), commits three changes and waits until serve has published them
// and the fleet runs them; it returns the connection it reads the streams
// by, the commits and each config's version published.
func (r *runbookServe) publish(t *testing.T, addr, pub string) (*nats.Conn, *commits, map[cuecast.ConfigPath]cuecast.Version) {
	t.Helper()
	nc, d := readStreams(t, addr)
	r.nc, r.d = nc, d
	r.f = startFleet(t, addr, pub, r.cfgs, len(r.cfgs))
	c := &commits{repo: r.repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	for range 3 {
		c.change(r.cfgs[0])
	}
	waitCursor(t, nc, r.repo.Head())
	published := map[cuecast.ConfigPath]cuecast.Version{}
	for _, cf := range r.cfgs {
		v, err := d.Latest(t.Context(), cf)
		if err != nil {
			t.Fatal(err)
		}
		published[cf] = v
	}
	r.f.converge(t, time.Now(), published)
	return nc, c, published
}

// damageLogged reports whether serve has logged every config as damaged,
// with the number its stream holds (none) and the one published, and if
// not, which one it has not.
func (r *runbookServe) damageLogged(published map[cuecast.ConfigPath]cuecast.Version) (bool, string) {
	log := r.serve.proc.stderr.String()
	for _, cf := range r.cfgs {
		line := regexp.MustCompile(`msg="version store damaged: publishing refused" .*config=` + regexp.QuoteMeta(string(cf)) +
			fmt.Sprintf(` stored=0 published=%d source=\S+`, published[cf].Version))
		if !line.MatchString(log) {
			return false, "no line for " + string(cf) + " in\n" + log
		}
	}
	return true, ""
}

// refusing reports whether /readyz is 503 and names repair, and what it
// answered.
func (r *runbookServe) refusing(t *testing.T) (bool, string) {
	code, body := get(t, r.base+"/readyz")
	return code == http.StatusServiceUnavailable && strings.Contains(body, "repair"), fmt.Sprint("/readyz ", code, " ", body)
}

// nonePublished fails t for each config its damaged stream answers for.
func (r *runbookServe) nonePublished(t *testing.T) {
	t.Helper()
	for _, cf := range r.cfgs {
		if v, err := r.d.Latest(t.Context(), cf); err == nil {
			t.Errorf("%s: v%d published from a damaged stream", cf, v.Version)
		}
	}
}

// repairThenServe runs the runbook's steps 2 and 3, serve stopped:
// `cuecast repair` with args (what names it in messages) prints, for each
// config, the number the stream held, the one published and the one it
// takes now; serve started again serves every config at the tip under a
// number above every one published, the instances move to those numbers
// and /readyz is 200.
func (r *runbookServe) repairThenServe(t *testing.T, published map[cuecast.ConfigPath]cuecast.Version, what string, args ...string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"repair"}, args...)...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", what, code, stdout, stderr)
	}
	for _, cf := range r.cfgs {
		want := fmt.Sprintf("  %s: stream held v0, v%d was published; now v%d (content), deployed, audited\n", cf, published[cf].Version, published[cf].Version+1)
		if !strings.Contains(stdout, want) {
			t.Errorf("%s printed\n%s\nwant the line %q", what, stdout, want)
		}
	}
	r.start(t)
	readerBack(t, r.nc)
	latest := map[cuecast.ConfigPath]cuecast.Version{}
	for _, cf := range r.cfgs {
		v, err := r.d.Latest(t.Context(), cf)
		if err != nil || v.Version <= published[cf].Version || v.Commit != r.repo.Head() {
			t.Fatalf("%s after %s: v%d of %s (%v), want a number above v%d of the tip", cf, what, v.Version, short(v.Commit), err, published[cf].Version)
		}
		latest[cf] = v
	}
	r.f.converge(t, time.Now(), latest)
	poll.Until(t, "/readyz 200", poll.Patience, func() (bool, string) {
		code, body := get(t, r.base+"/readyz")
		return code == http.StatusOK, fmt.Sprint(code, " ", body)
	})
}
