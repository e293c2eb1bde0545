package ofrep_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuecast/cuecast/flags/ofrep"
)

var update = flag.Bool("update", false, "rewrite testdata/wire.golden from the handler's responses")

// wireSet has what the vectors lack: rule ids that JSON escapes (HTML
// characters, a quote, non-ASCII), a rule at index 0 and a position 0
// (zero, yet present), float values whole and not, and an object.
const wireSet = `{"schema": "cuecast.flags/v1", "flags": {
  "escaped": {"type": "string", "variants": {"a": "<b>&\"é\u2028", "b": "plain"}, "on": true, "offVariant": "b", "defaultVariant": "b", "salt": "escaped",
    "rules": [{"id": "<staff> & \"friends\" é", "clauses": [{"attribute": "email", "op": "endsWith", "values": ["@example.com"]}], "variant": "a"}]},
  "zero": {"type": "float", "variants": {"whole": 2, "half": 0.5, "tiny": 1e-9}, "on": true, "offVariant": "whole", "defaultVariant": "half", "salt": "zero",
    "rules": [{"clauses": [{"attribute": "country", "op": "in", "values": ["NL"]}], "rollout": {"weights": [{"variant": "tiny", "weight": 1}, {"variant": "whole", "weight": 99999}]}}]},
  "obj": {"type": "object", "variants": {"x": {"z": 1, "a": [true, null, "s"]}}, "on": false, "offVariant": "x", "defaultVariant": "x", "salt": "obj"}
}}`

// TestWireGolden: the bytes OFREP answers, status and body, for every case
// of the shared vectors, wireSet's flags in several contexts, and bulk
// evaluations, are testdata/wire.golden's. A change to how responses are
// encoded must leave them as they are (go test -update rewrites the file,
// for a change meant to alter them).
func TestWireGolden(t *testing.T) {
	v, st := loadVectors(t)
	if _, err := st.Apply("wire/flags", 7, []byte(wireSet), false); err != nil {
		t.Fatal(err)
	}
	h, err := ofrep.New(ofrep.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	do := func(path, body string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, bytes.NewReader([]byte(body))))
		fmt.Fprintf(&out, "POST %s %s\n%d %s\n%s\n\n", path, body, w.Code, w.Header().Get("ETag"), w.Body.Bytes())
	}
	for _, c := range v.Cases {
		ctx := c.Context
		if len(ctx) == 0 || string(ctx) == "null" {
			ctx = json.RawMessage(`{}`)
		}
		do("/ofrep/v1/evaluate/flags/vectors/"+c.Set+"/"+c.Flag, `{"context": `+string(ctx)+`}`)
	}
	contexts := []string{`{}`, `{"targetingKey": "user-1", "email": "ann@example.com"}`, `{"targetingKey": "user-1", "country": "NL"}`,
		`{"targetingKey": "user-2", "country": "NL", "email": "bo@example.org"}`}
	for _, ctx := range contexts {
		for _, f := range []string{"escaped", "zero", "obj", "nope"} {
			do("/ofrep/v1/evaluate/flags/wire/flags/"+f, `{"context": `+ctx+`}`)
		}
		do("/ofrep/v1/evaluate/flags", `{"context": `+ctx+`}`)
	}
	golden := filepath.Join("testdata", "wire.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Bytes(); !bytes.Equal(got, want) {
		gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := range min(len(gl), len(wl)) {
			if !bytes.Equal(gl[i], wl[i]) {
				t.Fatalf("%s line %d:\n got %s\nwant %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: got %d lines, want %d", golden, len(gl), len(wl))
	}
}
