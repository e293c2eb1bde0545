package ci

import "testing"

// TestConfigStatus: what a check reports for a config, from where it exists
// and compiles at the base and the head.
func TestConfigStatus(t *testing.T) {
	type in struct{ manifest, inBase, inHead, bok, hok, baseErrs, same bool }
	tests := []struct {
		name string
		in   in
		want Status // "": left out
	}{
		{"no manifest at head, config only at head", in{inHead: true, hok: true}, ""},
		{"no manifest at head, config broken at base", in{inBase: true, baseErrs: true}, StatusStillInvalid},
		{"no manifest at head, config valid at base", in{inBase: true, bok: true}, StatusInvalid},
		{"nowhere", in{manifest: true}, ""},
		{"deleted", in{manifest: true, inBase: true, bok: true}, StatusRemoved},
		{"new and broken", in{manifest: true, inHead: true}, StatusInvalid},
		{"broken by the change", in{manifest: true, inBase: true, inHead: true, bok: true}, StatusInvalid},
		{"not compiled at base, no error there, broken at head", in{manifest: true, inBase: true, inHead: true}, StatusInvalid},
		{"broken before and after", in{manifest: true, inBase: true, inHead: true, baseErrs: true}, StatusStillInvalid},
		{"new", in{manifest: true, inHead: true, hok: true}, StatusAdded},
		{"fixed", in{manifest: true, inBase: true, inHead: true, hok: true, baseErrs: true}, StatusFixed},
		{"same output", in{manifest: true, inBase: true, inHead: true, bok: true, hok: true, same: true}, StatusUnchanged},
		{"changed output", in{manifest: true, inBase: true, inHead: true, bok: true, hok: true}, StatusChanged},
	}
	for _, tt := range tests {
		i := tt.in
		got, ok := configStatus(i.manifest, i.inBase, i.inHead, i.bok, i.hok, i.baseErrs, i.same)
		if !ok {
			got = ""
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
