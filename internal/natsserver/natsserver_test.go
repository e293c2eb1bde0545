package natsserver_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natsserver"
)

// TestServerLogsReachSlog: the embedded server logs through Options.Logger
// (it used to run with NoLog, hiding its warnings and errors).
func TestServerLogsReachSlog(t *testing.T) {
	var buf iostreams.SyncBuffer
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
