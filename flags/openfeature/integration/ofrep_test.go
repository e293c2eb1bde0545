package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"

	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/nodetest"
	"github.com/cuecast/cuecast/internal/poll"
)

// remoteRequest is one evaluation asked of another language's SDK
// (testdata/ofrep/node.mjs, web.html).
type remoteRequest struct {
	Kind    string         `json:"kind"`
	Flag    string         `json:"flag"`
	Def     any            `json:"def"`
	Context map[string]any `json:"context"`
}

// remoteDetails is the SDK's evaluation details as JSON.
type remoteDetails struct {
	Value        any            `json:"value"`
	Variant      string         `json:"variant"`
	Reason       string         `json:"reason"`
	ErrorCode    string         `json:"errorCode"`
	ErrorMessage string         `json:"errorMessage"`
	FlagMetadata map[string]any `json:"flagMetadata"`
}

// remote is an evaluator over another language's SDK and its OFREP
// provider: do sends one request and returns the details. The suite's
// flags are addressed as OFREP keys, <config path>/<flag>.
type remote struct {
	do func(remoteRequest) (remoteDetails, error)
}

func (r remote) ready() error { return nil }

func (r remote) evaluate(kind, flag string, def any, ec of.EvaluationContext) (any, of.EvaluationDetails, error) {
	ctx := ec.Attributes()
	if ec.TargetingKey() != "" {
		ctx["targetingKey"] = ec.TargetingKey()
	}
	if def == nil {
		def = map[string]any{} // a JS object; JSON null would be null, not an object
	}
	d, err := r.do(remoteRequest{Kind: kind, Flag: string(cfg) + "/" + flag, Def: def, Context: ctx})
	if err != nil {
		return nil, of.EvaluationDetails{}, err
	}
	details := of.EvaluationDetails{FlagKey: flag, ResolutionDetail: of.ResolutionDetail{Variant: d.Variant,
		Reason: of.Reason(d.Reason), ErrorCode: of.ErrorCode(d.ErrorCode), ErrorMessage: d.ErrorMessage, FlagMetadata: d.FlagMetadata}}
	value := d.Value
	if f, ok := value.(float64); ok && kind == "integer" {
		value = int64(f) // JavaScript has one number type; the steps want the Go SDK's
	}
	if m, ok := value.(map[string]any); ok && kind == "object" && len(m) == 0 {
		value = nil // the default that stood in for null
	}
	if d.ErrorCode != "" {
		return value, details, fmt.Errorf("%s: %s", d.ErrorCode, d.ErrorMessage)
	}
	return value, details, nil
}

var ofrepAddrRE = regexp.MustCompile(`OFREP at (\S+)/ofrep/v1/`)

// agentOFREP runs `cuecast agent --ofrep 127.0.0.1:0 --ofrep-insecure-local` following cfg on e's
// server until the test ends, and returns its OFREP base URL once it
// serves version n of the set.
func (e *env) agentOFREP(t *testing.T, n uint64) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &iostreams.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		io := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: stderr}
		done <- cli.Main(ctx, []string{"agent", "--nats", e.srv.ClientURL(), "--instance", "ofrep-" + strings.ToLower(t.Name()),
			"--trusted-key", e.pub, "--config", string(cfg), "--dir", t.TempDir(), "--ofrep", "127.0.0.1:0", "--ofrep-insecure-local"}, io, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("agent exited %d: %s", code, stderr)
		}
	})
	var base string
	poll.Until(t, "the agent's OFREP address", poll.Patience, func() (bool, string) {
		if m := ofrepAddrRE.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		}
		return base != "", stderr.String()
	})
	e.awaitOFREP(t, base, n)
	return base
}

// awaitOFREP waits until the OFREP server at base serves version n of cfg.
func (e *env) awaitOFREP(t *testing.T, base string, n uint64) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%s@%d over OFREP", cfg, n), poll.Patience, func() (bool, string) {
		res, err := httpPost(base+"/ofrep/v1/evaluate/flags", `{"context": {}}`)
		if err != nil {
			return false, err.Error()
		}
		var bulk struct{ Metadata map[string]float64 }
		json.Unmarshal(res, &bulk)
		return bulk.Metadata[string(cfg)] == float64(n), string(res)
	})
}

// TestOFREPNode runs testdata/evaluation.feature, the OpenFeature
// evaluation suite TestSpecEvaluation runs in Go, through Node's
// @openfeature/server-sdk with OpenFeature's @openfeature/ofrep-provider
// against `cuecast agent --ofrep`; then a new version of the set reaches
// the SDK.
func TestOFREPNode(t *testing.T) {
	dir := nodetest.Install(t)
	content := suiteFlags(t)
	e := newEnv(t)
	e.ship(1, content)
	base := e.agentOFREP(t, 1)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", nodetest.Script(t, dir, readFile(t, "testdata/ofrep/node.mjs")))
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "OFREP_ENDPOINT="+base)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr iostreams.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cancel(); cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.Contains(lines.Text(), `"ready":true`) {
		t.Fatalf("node did not start: %q; stderr %s", lines.Text(), &stderr)
	}
	var mu sync.Mutex // one request in flight: node answers in order
	node := remote{do: func(req remoteRequest) (remoteDetails, error) {
		mu.Lock()
		defer mu.Unlock()
		b, _ := json.Marshal(req)
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			return remoteDetails{}, fmt.Errorf("node: %w; stderr %s", err, &stderr)
		}
		if !lines.Scan() {
			return remoteDetails{}, fmt.Errorf("node stopped: %v; stderr %s", lines.Err(), &stderr)
		}
		var d remoteDetails
		err := json.Unmarshal(lines.Bytes(), &d)
		return d, err
	}}

	runSpecSuite(t, node)
	t.Run("the metadata names the set and its version", func(t *testing.T) {
		_, d, err := node.evaluate("boolean", "boolean-flag", false, of.NewEvaluationContext("user-1", nil))
		if err != nil || d.FlagMetadata["config"] != string(cfg) || d.FlagMetadata["version"] != 1.0 {
			t.Errorf("metadata %v, %v; want config %s, version 1", d.FlagMetadata, err, cfg)
		}
	})

	e.ship(2, strings.Replace(content, `"defaultVariant":"greeting"`, `"defaultVariant":"parting"`, 1))
	e.awaitOFREP(t, base, 2)
	if v, d, err := node.evaluate("string", "string-flag", "x", of.EvaluationContext{}); v != "bye" || d.FlagMetadata["version"] != 2.0 {
		t.Errorf("string-flag after version 2: %v %v %v; want bye from version 2", v, d, err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// httpPost posts a JSON body and returns the response body.
func httpPost(url, body string) ([]byte, error) {
	res, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	return io.ReadAll(res.Body)
}
