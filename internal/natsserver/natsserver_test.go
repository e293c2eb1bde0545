package natsserver_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/cuecast/cuecast/internal/natsserver"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServerLogsReachSlog: the embedded server logs through Options.Logger
// (it used to run with NoLog, hiding its warnings and errors).
func TestServerLogsReachSlog(t *testing.T) {
	var buf lockedBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := natsserver.Start(context.Background(), natsserver.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	out := buf.String()
	if !strings.Contains(out, "component=nats") || !strings.Contains(out, "JetStream") {
		t.Fatalf("server log lines did not reach slog:\n%s", out)
	}
}
