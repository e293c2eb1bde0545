package client_test

import (
	"testing"

	"github.com/cuecast/cuecast/client"
)

// TestDecodeStrict: strict decoding refuses a field the type lacks and
// anything after the JSON value. json.Decoder.More says false before a
// closing } or ], so "{…}}" and "{…}]" passed as one value.
func TestDecodeStrict(t *testing.T) {
	type cfg struct{ A int }
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"A":1}`, true},
		{" {\"A\":1}\n\t ", true},
		{`{"A":1,"B":2}`, false},
		{`{"A":1}{"A":2}`, false},
		{`{"A":1} 3`, false},
		{`{"A":1}}`, false},
		{`{"A":1}]`, false},
		{`{"A":1},`, false},
		{`{"A":1`, false},
	} {
		v, err := client.DecodeStrict[cfg]([]byte(tc.in))
		if (err == nil) != tc.ok || tc.ok && v.A != 1 {
			t.Errorf("DecodeStrict(%q) = %+v, %v; want ok %v", tc.in, v, err, tc.ok)
		}
	}
}
