package client

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
)

// pointerCases are encodings the fast path must read exactly as
// encoding/json does, or leave to it.
func pointerCases() [][]byte {
	at := time.Date(2026, 11, 30, 3, 4, 5, 123456789, time.UTC)
	full := cuecast.Pointer{Config: "payments/checkout", Subject: "cc.payments.p.all.checkout", Revision: 1764558245123456789, Version: 7, Seq: 104, Checksum: cuecast.Checksum([]byte("x")),
		Size: 1234, Commit: "9fceb02d0ae598e95dc970b74767f19372d61af8", Deleted: true, Inline: true, Rollback: true,
		Rollout: "r-17", Reason: "bad canary", SetAt: at, Signature: "c2lnbmF0dXJl"}
	var out [][]byte
	for _, p := range []cuecast.Pointer{
		full,
		{},
		{Config: "a/b", Version: math.MaxUint64, Seq: 0, Size: 0, SetAt: at.In(time.FixedZone("x", 3600))},
		{Config: "a/b", Reason: `said "no" <now> & then`},
		{Config: "a/b", Reason: "naïve ✓"},
		{Config: "a/b", Size: -1},
	} {
		b, err := json.Marshal(p)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	for _, s := range []string{
		`{}`, `{"config":"a/b"}`, `{ "config":"a/b"}`, `{"config":"a/b"} `, `{"Config":"a/b"}`,
		`{"config":"a/b","config":"c/d"}`, `{"config":null}`, `{"version":01}`, `{"version":1.0}`,
		`{"version":-1}`, `{"version":18446744073709551616}`, `{"size":4611686018427387905}`,
		`{"inline":tru}`, `{"inline":true,}`, `{"inline":1}`, `{"set_at":"yesterday"}`,
		`{"set_at":"2026-11-30T03:04:05Z"}`, `{"set_at":"2026-11-30T03:04:05.1Z"}`, `{"set_at":"2026-11-30T03:04:05.000000001Z"}`,
		`{"set_at":"2026-11-30T03:04:05.Z"}`, `{"set_at":"2026-11-30T03:04:05.1234567891Z"}`, `{"set_at":"2026-11-30T03:04:05+01:00"}`,
		`{"set_at":"2024-02-29T00:00:00Z"}`, `{"set_at":"2026-02-29T00:00:00Z"}`, `{"set_at":"2026-04-31T00:00:00Z"}`,
		`{"set_at":"2026-12-31T23:59:59.999999999Z"}`, `{"set_at":"2026-11-30T24:00:00Z"}`, `{"set_at":"2026-11-30T03:60:05Z"}`,
		`{"set_at":"2026-11-30T03:04:60Z"}`, `{"set_at":"2026-13-01T03:04:05Z"}`, `{"set_at":"2026-00-01T03:04:05Z"}`,
		`{"set_at":"2026-11-00T03:04:05Z"}`, `{"set_at":"0000-01-01T00:00:00Z"}`, `{"set_at":"2026-1-30T03:04:05Z"}`,
		`{"set_at":"2026-11-30t03:04:05z"}`, `{"set_at":"2026-11-30T03:04:05.-1Z"}`, `{"set_at":"+026-11-30T03:04:05Z"}`,
		`{"set_at":"2026-11-30T03:04:05.12a4Z"}`, `{"set_at":"2026-11-30 03:04:05Z"}`, `{"unknown":{"nested":[1,2]},"version":3}`,
		`{"config":"a\"b"}`, "{\"config\":\"a\x01b\"}", "{\"config\":\"a\xffb\"}", `{"config":"a/b"`,
		`{"config" "a/b"}`, `{"config":"a/b"}}`, `[]`, ``, `{`, `{"sig":"x","sig":""}`, `{"rev":-1}`, `{"rev":"1"}`, `{"subject":1}`,
	} {
		out = append(out, []byte(s))
	}
	return out
}

func TestDecodePointer(t *testing.T) {
	for _, b := range pointerCases() {
		checkDecode(t, b)
	}
	// The distributor's own encodings take the fast path.
	b, _ := json.Marshal(cuecast.Pointer{Config: "payments/checkout", Subject: "cc.payments.p.all.checkout", Revision: uint64(time.Now().UnixNano()),
		Version: 3, Commit: "abc", Inline: true, SetAt: time.Now()})
	var p cuecast.Pointer
	if ok := scanPointer(&p, string(b)); !ok {
		t.Fatalf("scanPointer(%s): fell back to encoding/json", b)
	}
	// And their times take utcTime's, for every number of decimals
	// time.RFC3339Nano writes.
	for _, at := range []time.Time{time.Now().UTC(), time.Now().UTC().Truncate(time.Second), time.Now().UTC().Truncate(time.Millisecond)} {
		b, _ := at.MarshalJSON()
		if got, ok := utcTime(string(b[1 : len(b)-1])); !ok || got != at {
			t.Fatalf("utcTime(%s) = %v, %t; want %v", b, got, ok, at)
		}
	}
}

func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	var want cuecast.Pointer
	werr := json.Unmarshal(b, &want)
	// Decoded over a pointer decoded before: nothing of it may remain.
	got := cuecast.Pointer{Config: "stale/config", Version: 99, Reason: "stale", Rollback: true}
	err := decodePointer(&got, string(b))
	if (err != nil) != (werr != nil) {
		t.Fatalf("decodePointer(%q): error %v, encoding/json says %v", b, err, werr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodePointer(%q):\n got %+v\nwant %+v", b, got, want)
	}
}

func FuzzDecodePointer(f *testing.F) {
	for _, b := range pointerCases() {
		f.Add(b)
	}
	f.Fuzz(checkDecode)
}

func BenchmarkDecodePointer(b *testing.B) {
	enc, _ := json.Marshal(cuecast.Pointer{Config: "payments/checkout", Version: 12, Seq: 123456,
		Checksum: cuecast.Checksum([]byte("x")), Size: 2234, Commit: "9fceb02d0ae598e95dc970b74767f19372d61af8",
		Inline: true, Rollout: "deploy", SetAt: time.Now(), Signature: "c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl"})
	b.Run("scan", func(b *testing.B) {
		var p cuecast.Pointer
		for b.Loop() {
			if err := decodePointer(&p, string(enc)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var p cuecast.Pointer
			if err := json.Unmarshal(enc, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
