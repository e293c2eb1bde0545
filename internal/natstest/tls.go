package natstest

import (
	"testing"

	"github.com/cuecast/cuecast/internal/natsconf"
)

// TLSFiles writes a fresh CA and a certificate for 127.0.0.1 and localhost
// signed by it (serving both as server and client certificate) into
// t.TempDir(), and returns their paths: what `cuecast serve --secure` and
// `nats-config` make (natsconf.EnsureTLS), so the tests run on those.
func TLSFiles(t testing.TB) *natsconf.TLS {
	t.Helper()
	files, err := natsconf.EnsureTLS(t.TempDir(), "localhost", []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatalf("tls files: %v", err)
	}
	return files
}
