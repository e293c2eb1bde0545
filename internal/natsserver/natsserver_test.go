package natsserver_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
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

// TestStartNamesAPortTakenUnderTheServer: a port the server cannot listen
// on, one checkPort does not look at (here a leaf node port from the
// configuration file; for the client port, another process binding it
// between checkPort's look and the server's listen, seen under load in
// TestRunbookDamagedStream). The server only logs it as fatal and never
// becomes ready; Start said "not ready after 10s: still recovering the
// JetStream store", after 10 s, blaming the store for a port.
func TestStartNamesAPortTakenUnderTheServer(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("leafnodes { listen: %q }\n", taken.Addr().String())), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := natsserver.Start(t.Context(), natsserver.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0", ConfigFile: conf})
	if err == nil {
		s.Shutdown()
		t.Fatalf("started on a leaf node port another listener holds (%s)", taken.Addr())
	}
	port := fmt.Sprint(taken.Addr().(*net.TCPAddr).Port)
	if msg := err.Error(); !strings.Contains(msg, "leafnode port: "+port) || !strings.Contains(msg, "address already in use") || strings.Contains(msg, "recovering") {
		t.Fatalf("Start's error: %q; want the server's own: the leaf node port %s is in use, and no word of the store", msg, port)
	}
}
