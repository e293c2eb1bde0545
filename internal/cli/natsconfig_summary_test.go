package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestNATSConfigTreeSummarisesByDefault runs a tree the way docs/SCALING.md
// tells an operator to, with passwords and with .creds files: a hub that
// lists the region, a leaf generated with no summary flag at all, which
// summarises its region by default and says on stderr what to run, the
// summarizer it names with the credential nats-config wrote, serve on the
// hub and an instance on the leaf. The hub stores the region's summary and
// no instance report; status as the operator counts the instance, and
// status --instances fetches its own report from the region.
func TestNATSConfigTreeSummarisesByDefault(t *testing.T) {
	t.Parallel()
	for _, auth := range []string{"password", "jwt"} {
		t.Run(auth, func(t *testing.T) { testTreeSummarises(t, auth) })
	}
}

func testTreeSummarises(t *testing.T, auth string) {
	secrets := t.TempDir()
	login := func(user string) []string {
		if auth == "jwt" {
			return []string{"--creds", filepath.Join(secrets, user+".creds")}
		}
		return []string{"--user", user, "--password", password(t, secrets, user)}
	}
	hubLeafAddr := natstest.FreeAddr(t)
	hub := natsConfig(t, "hub", "--auth", auth, "--name", "hub", "--listen", "127.0.0.1:-1", "--leaf-listen", hubLeafAddr,
		"--store", t.TempDir(), "--namespace", "search", "--region", "eu-west", "--secrets", secrets)

	// The leaf, as the docs generate it: no --region, no opt-out.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code, conf, errOut := run(ctx, "nats-config", "leaf", "--auth", auth, "--name", "eu-west-a", "--domain", "eu-west",
		"--listen", "127.0.0.1:-1", "--leaf-listen", natstest.FreeAddr(t), "--upstream", hubLeafAddr,
		"--store", t.TempDir(), "--namespace", "search", "--secrets", secrets)
	if code != 0 {
		t.Fatalf("nats-config leaf: exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut.String(), "cuecast summarize --nats nats://127.0.0.1:-1 --region eu-west") || !strings.Contains(errOut.String(), "summarizer-eu-west") {
		t.Errorf("nats-config leaf does not say how to run the summarizer:\n%s", errOut)
	}
	leaf := startConf(t, conf.String())
	poll.Until(t, "the region linked to the hub", 20*time.Second, func() (bool, string) {
		return leaf.NumLeafNodes() == 1, "not yet"
	})

	data := t.TempDir()
	repo := exampleRepo(t)
	serveDone := make(chan int, 1)
	go func() {
		code, _, errOut := run(ctx, append([]string{"serve", "--repo", repo.Dir, "--data", data, "--interval", "20ms",
			"--nats", hub.ClientURL(), "--lease-ttl", "1s", "--heartbeat", "1s"}, login("distributor")...)...)
		if code != 0 {
			t.Errorf("serve: exit %d: %s", code, errOut)
		}
		serveDone <- code
	}()
	defer func() { cancel(); <-serveDone }()
	poll.Until(t, "the region's mirrors", 30*time.Second, func() (bool, string) {
		code, _, errOut := run(ctx, append([]string{"nats-config", "mirrors", "--nats", hub.ClientURL(),
			"--domain", "eu-west", "--upstream", "hub", "--from-hub", "--namespace", "search"}, login("distributor")...)...)
		return code == 0, errOut.String()
	})
	// What the leaf said to run, with the credential nats-config wrote.
	sumDone := make(chan struct{})
	go func() {
		defer close(sumDone)
		code, _, errOut := run(ctx, append([]string{"summarize", "--nats", leaf.ClientURL(), "--region", "eu-west", "--heartbeat", "1s"},
			login("summarizer-eu-west")...)...)
		if code != 0 {
			t.Errorf("summarize: exit %d: %s", code, errOut)
		}
	}()
	defer func() { cancel(); <-sumDone }()
	poll.Until(t, "serve's trusted-keys file", 30*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(data, "trusted-keys"))
		return err == nil, "not yet"
	})
	watchLogin := login("svc-search")
	if auth == "jwt" {
		code, o, e := run(ctx, "nats-config", "user", "--secrets", secrets, "--namespace", "search", "--instance", "search-canary-1")
		if code != 0 {
			t.Fatalf("nats-config user: exit %d: %s", code, e)
		}
		watchLogin = []string{"--creds", strings.TrimSpace(o.String())}
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		code, _, e := run(wctx, append([]string{"watch", "--nats", leaf.ClientURL(), "--namespace-mirror", "--heartbeat", "1s",
			"--trusted-keys-file", filepath.Join(data, "trusted-keys"),
			"--config", "search/ranking", "--instance", "search-canary-1"}, watchLogin...)...)
		if code != 0 {
			t.Errorf("watch: exit %d: %s", code, e)
		}
	}()
	defer func() { stopWatch(); <-watchDone }()

	poll.Until(t, "status counting the region's instance from its summary", 30*time.Second, func() (bool, string) {
		code, o, e := run(ctx, append([]string{"status", "--nats", hub.ClientURL(), "search/ranking"}, login("operator")...)...)
		ok := code == 0 && regexp.MustCompile(`(?m)^search/ranking\s+v1\s+1/1 instances`).MatchString(o.String())
		return ok, o.String() + e.String()
	})
	// The hub holds the region's summary, and no instance report.
	nc, err := nats.Connect(hub.ClientURL(), natsLogin(t, auth, secrets, "distributor"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, cuecast.ReportStream)
	if err != nil {
		t.Fatal(err)
	}
	for filter, want := range map[string]bool{cuecast.ReportPrefix + ".>": false, cuecast.SummaryPrefix + ".eu-west.>": true} {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
		if err != nil {
			t.Fatal(err)
		}
		if have := len(info.State.Subjects) > 0; have != want {
			t.Errorf("the hub's report stream holds %v on %s, want %v", info.State.Subjects, filter, want)
		}
	}

	// The per-instance view, fetched from the region on demand.
	code, o, e := run(ctx, append([]string{"status", "--nats", hub.ClientURL(), "search/ranking", "--instances", "--output", "json"}, login("operator")...)...)
	if code != 0 {
		t.Fatalf("status --instances: exit %d: %s", code, e)
	}
	var got []struct {
		Config    string `json:"config"`
		Instances []struct {
			Region   string `json:"region"`
			Instance string `json:"instance"`
			Version  uint64 `json:"version"`
		} `json:"instances"`
	}
	if err := json.Unmarshal([]byte(o.String()), &got); err != nil {
		t.Fatalf("status --instances --output json: %v\n%s", err, o)
	}
	if len(got) != 1 || len(got[0].Instances) != 1 || got[0].Instances[0].Instance != "search-canary-1" || got[0].Instances[0].Region != "eu-west" || got[0].Instances[0].Version != 1 {
		t.Errorf("status --instances = %s, want search-canary-1 on v1 in region eu-west", o)
	}
	row := regexp.MustCompile(`(?m)^search/ranking\s+search-canary-1\s+eu-west\s+v1\s`)
	code, o, e = run(ctx, append([]string{"status", "--nats", hub.ClientURL(), "search/ranking", "--instances"}, login("operator")...)...)
	if code != 0 || !row.MatchString(o.String()) {
		t.Errorf("status --instances: exit %d:\n%s%s", code, o, e)
	}

	// A region that summarises the config and does not answer is named,
	// with exit 1, beside the rows of those that did. (Its summary lives
	// four heartbeats: each try sends it again.)
	cfg := cuecast.ConfigPath("search/ranking")
	silent, err := json.Marshal(distributor.BuildSummary("us-east", cfg, []cuecast.Report{{Instance: "ghost-1", Config: cfg, Version: 1, Healthy: true}}, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "status --instances naming the region that did not answer", 30*time.Second, func() (bool, string) {
		if err := nc.Publish(cuecast.SummarySubject("us-east", cfg), silent); err != nil {
			return false, err.Error()
		}
		if err := nc.Flush(); err != nil {
			return false, err.Error()
		}
		code, o, e := run(ctx, append([]string{"status", "--nats", hub.ClientURL(), "search/ranking", "--instances", "--timeout", "500ms"}, login("operator")...)...)
		return code == cli.ExitFailure && strings.Contains(e.String(), "us-east") && row.MatchString(o.String()), fmt.Sprintf("exit %d\n%s%s", code, o, e)
	})
}

// natsLogin is user's login to a tree nats-config generated in secrets.
func natsLogin(t *testing.T, auth, secrets, user string) nats.Option {
	if auth == "jwt" {
		return nats.UserCredentials(filepath.Join(secrets, user+".creds"))
	}
	return nats.UserInfo(user, password(t, secrets, user))
}

// TestNATSConfigLeafPerInstanceReports: --per-instance-reports keeps a leaf
// the way it was before summaries: its link sends every report up, no
// summarizer user, nothing to run.
func TestNATSConfigLeafPerInstanceReports(t *testing.T) {
	args := []string{"nats-config", "leaf", "--name", "eu-west-a", "--store", t.TempDir(), "--secrets", t.TempDir(), "--upstream", "hub-a:7422", "--namespace", "search"}
	code, out, errOut := run(context.Background(), append(args, "--per-instance-reports")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out.String(), "summarizer-") || strings.Contains(out.String(), `"ccs.>"]`) || errOut.String() != "" {
		t.Errorf("--per-instance-reports still summarises:\n%s\nstderr: %s", out, errOut)
	}
	code, out, _ = run(context.Background(), args...)
	if code != 0 || !strings.Contains(out.String(), `user: "summarizer-eu-west-a"`) || !strings.Contains(out.String(), `deny_exports: ["ccr.>", "ccs.>"]`) {
		t.Errorf("a leaf without flags (exit %d) does not summarise as region eu-west-a:\n%s", code, out)
	}
}
