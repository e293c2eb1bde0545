package cli_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestServeAnswersWhatItAnnounces: serve's "dashboard at" line is what a
// person or a supervisor waits for, so the operations server answers by
// the time it is printed. The probe asks for the dashboard while serve is
// still writing the line (its Write returns only after the answer), so
// nothing serve does after announcing can make the answer right. Before
// the fix the operations server was opened only after the line, and
// answered "not ready: starting" in between: TestRunbookDamagedStream's
// webhook push, sent the moment serve announced itself, got that 503
// once in a run instead of the 403 it tests.
func TestServeAnswersWhatItAnnounces(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	probe := &announceProbe{announced: regexp.MustCompile(`cuecast serve: dashboard at (http://\S+/) `), done: cancel}
	errOut := &syncBuffer{}
	served := make(chan int, 1)
	go func() {
		io := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.MultiWriter(errOut, probe)}
		served <- cli.Main(ctx, []string{"serve", "--repo", repo.Dir, "--data", t.TempDir(),
			"--listen", natstest.FreeAddr(t), "--http", natstest.FreeAddr(t), "--interval", "50ms"}, io, func(string) string { return "" })
	}()
	select {
	case code := <-served:
		if code != 0 {
			t.Fatalf("serve: exit %d\n%s", code, errOut)
		}
	case <-time.After(2 * time.Minute):
		cancel()
		t.Fatalf("serve neither announced its dashboard nor stopped in 2 minutes\n%s", errOut)
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if probe.url == "" {
		t.Fatalf("serve never said where its dashboard is\n%s", errOut)
	}
	if probe.err != nil || probe.code != http.StatusOK {
		t.Errorf("GET %s as serve announced it: %d %q (%v), want 200: the dashboard it names", probe.url, probe.code, probe.body, probe.err)
	}
}

// announceProbe asks for the dashboard inside the Write of the line that
// announces it, then stops serve (done).
type announceProbe struct {
	announced *regexp.Regexp
	done      context.CancelFunc

	mu   sync.Mutex
	url  string
	code int
	body string
	err  error
}

func (p *announceProbe) Write(b []byte) (int, error) {
	m := p.announced.FindSubmatch(b)
	if m == nil {
		return len(b), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.url != "" {
		return len(b), nil
	}
	p.url = string(m[1])
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(p.url)
	if err != nil {
		p.err = err
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		p.code, p.body = resp.StatusCode, string(body)
	}
	p.done()
	return len(b), nil
}
