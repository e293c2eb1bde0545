package web_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/cputime"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
)

// The load clients of BenchmarkServeOFREP are this test binary run again
// with these variables set (TestMain): processes of their own, so that the
// benchmark's process CPU is the server's alone.
const (
	loadURLEnv   = "CUECAST_OFREP_LOAD_URL"
	loadTokenEnv = "CUECAST_OFREP_LOAD_TOKEN"
	loadNEnv     = "CUECAST_OFREP_LOAD_N"
	loadConnsEnv = "CUECAST_OFREP_LOAD_CONNS"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(loadURLEnv); url != "" {
		os.Exit(ofrepLoad(url, os.Getenv(loadTokenEnv), os.Getenv(loadNEnv), os.Getenv(loadConnsEnv)))
	}
	os.Exit(m.Run())
}

// ofrepBody is the context each load request evaluates new-checkout in
// (a rollout: SHA-256 bucketing of the targeting key).
const ofrepBody = `{"context": {"targetingKey": "user-1", "plan": "pro", "country": "NL"}}`

// ofrepLoad is a load client: it says "ready", waits for a line on stdin,
// posts n single evaluations to url over conns keep-alive connections, and
// prints "done" and the number of failures.
func ofrepLoad(url, token, nStr, connsStr string) int {
	n, err1 := strconv.Atoi(nStr)
	conns, err2 := strconv.Atoi(connsStr)
	if err1 != nil || err2 != nil || conns < 1 {
		fmt.Fprintf(os.Stderr, "load client: bad %s=%q or %s=%q\n", loadNEnv, nStr, loadConnsEnv, connsStr)
		return 2
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintf(os.Stderr, "load client: read the start: %v\n", err)
		return 2
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for c := range conns {
		share := n / conns
		if c < n%conns {
			share++
		}
		wg.Go(func() {
			for range share {
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(ofrepBody))
				req.Header.Set("Authorization", "Bearer "+token)
				res, err := hc.Do(req)
				ok := err == nil && res.StatusCode == http.StatusOK
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				if !ok {
					mu.Lock()
					if failed == 0 {
						fmt.Fprintf(os.Stderr, "load client: %v %v\n", err, res)
					}
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	fmt.Println("done", failed)
	return 0
}

// BenchmarkServeOFREP is single evaluations through what `cuecast serve
// --http ADDR --ofrep-tokens FILE` serves: the pipeline's operations server
// (internal/web's mux, its http.Server, token auth) over configs-example's
// published growth/flags, evaluated from the store the dashboard's sampler
// keeps; the clients are 2 child processes of 8 keep-alive connections
// each. server-cpu-µs/eval is this process's CPU (the server, with the
// pipeline's NATS and tailer idling) per evaluation: 2e6 divided by it is
// what 2 dedicated cores sustain. evals/s is wall-clock with the clients on
// the same cores, so it swings with the machine's load.
func BenchmarkServeOFREP(b *testing.B) {
	const procs, conns = 2, 8
	tokens, token := growthTokens(b)
	repo := gittest.New(b)
	repo.CopyDir(filepath.Join("..", "..", "configs-example"))
	repo.Commit("initial configs")
	p, _ := pipelinetest.Run(b, pipeline.Config{
		Repo:        repo.Dir,
		HTTP:        "127.0.0.1:0",
		OFREPTokens: tokens,
		Logger:      slog.New(slog.NewTextHandler(b.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	url := "http://" + p.HTTPAddr() + "/ofrep/v1/evaluate/flags/growth/flags/new-checkout"
	poll.Until(b, "growth/flags over OFREP", poll.Patience, func() (bool, string) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(ofrepBody))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})

	type client struct {
		cmd   *exec.Cmd
		start io.WriteCloser
		out   *bufio.Reader
	}
	clients := make([]client, procs)
	for i := range clients {
		n := b.N / procs
		if i < b.N%procs {
			n++
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), loadURLEnv+"="+url, loadTokenEnv+"="+token,
			loadNEnv+"="+strconv.Itoa(n), loadConnsEnv+"="+strconv.Itoa(conns))
		cmd.Stderr = os.Stderr
		start, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		clients[i] = client{cmd: cmd, start: start, out: bufio.NewReader(out)}
		if line, err := clients[i].out.ReadString('\n'); line != "ready\n" {
			b.Fatalf("load client %d: %q, %v; want ready", i, line, err)
		}
	}
	b.ResetTimer()
	cpu, began := cputime.Process(), time.Now()
	for _, c := range clients {
		fmt.Fprintln(c.start)
	}
	failed := 0
	for i, c := range clients {
		line, err := c.out.ReadString('\n')
		var f int
		if _, serr := fmt.Sscanf(line, "done %d", &f); serr != nil {
			b.Fatalf("load client %d: %q, %v; want done", i, line, err)
		}
		failed += f
	}
	elapsed, cpu := time.Since(began), cputime.Process()-cpu
	b.StopTimer()
	for i, c := range clients {
		c.start.Close()
		if err := c.cmd.Wait(); err != nil {
			b.Errorf("load client %d: %v", i, err)
		}
	}
	if failed > 0 {
		b.Fatalf("%d of %d evaluations failed", failed, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "evals/s")
	// cputime.Process is 0 where it is not measured.
	if cpu > 0 {
		b.ReportMetric(float64(cpu)/1e3/float64(b.N), "server-cpu-µs/eval")
	}
}
