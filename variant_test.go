package cuecast_test

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/cuecast/cuecast"
)

func TestConfigPathValidateVariants(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"payments/checkout", true},
		{"payments/checkout/eu", true},
		{"payments/checkout/env=prod", true},
		{"payments/checkout/env=prod/region=eu", true},
		{"payments/env=prod", false}, // a variant of no config
		{"payments", false},
		{"payments/env=prod/checkout", false},           // plain after variant
		{"payments/checkout/region=eu/env=prod", false}, // unsorted
		{"payments/checkout/env=prod/env=staging", false},
		{"payments/checkout/env=", false},
		{"payments/checkout/=prod", false},
		{"payments/checkout/env=Prod", false},
		{"payments/checkout/env=prod=x", false},
		{"env=prod/checkout", false},
		{"Payments/checkout", false},
	} {
		err := cuecast.ConfigPath(tc.path).Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok %v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, cuecast.ErrInvalidPath) {
			t.Errorf("Validate(%q) = %v, not ErrInvalidPath", tc.path, err)
		}
	}
}

func TestConfigPathBaseAndVariant(t *testing.T) {
	for _, tc := range []struct {
		path, base, label string
		variant           []cuecast.DimValue
	}{
		{"payments/checkout", "payments/checkout", "", nil},
		{"payments/a/b", "payments/a/b", "", nil},
		{"payments/checkout/env=prod", "payments/checkout", "env=prod", []cuecast.DimValue{{Dim: "env", Value: "prod"}}},
		{"payments/checkout/env=prod/region=eu", "payments/checkout", "env=prod,region=eu",
			[]cuecast.DimValue{{Dim: "env", Value: "prod"}, {Dim: "region", Value: "eu"}}},
	} {
		p := cuecast.ConfigPath(tc.path)
		if got := p.Base(); got != cuecast.ConfigPath(tc.base) {
			t.Errorf("%s.Base() = %s, want %s", tc.path, got, tc.base)
		}
		if got := p.Variant(); !slices.Equal(got, tc.variant) {
			t.Errorf("%s.Variant() = %v, want %v", tc.path, got, tc.variant)
		}
		if got := p.VariantLabel(); got != tc.label {
			t.Errorf("%s.VariantLabel() = %q, want %q", tc.path, got, tc.label)
		}
		if got := p.IsVariant(); got != (tc.variant != nil) {
			t.Errorf("%s.IsVariant() = %v", tc.path, got)
		}
	}
}

func TestVariantPathAndParse(t *testing.T) {
	dims := map[string]string{"region": "eu", "env": "prod"}
	if got := cuecast.VariantPath("payments/checkout", dims); got != "payments/checkout/env=prod/region=eu" {
		t.Errorf("VariantPath = %s", got)
	}
	if got := cuecast.VariantPath("payments/checkout", nil); got != "payments/checkout" {
		t.Errorf("VariantPath with no dims = %s", got)
	}
	got, err := cuecast.ParseVariant("env=prod, region=eu")
	if err != nil || !maps.Equal(got, dims) {
		t.Errorf("ParseVariant = %v, %v; want %v", got, err, dims)
	}
	if got, err := cuecast.ParseVariant(""); err != nil || len(got) != 0 {
		t.Errorf("ParseVariant(\"\") = %v, %v", got, err)
	}
	for _, bad := range []string{"env", "env=prod,env=staging", "Env=prod", "env=prod,,region=eu", "env=pr od"} {
		if _, err := cuecast.ParseVariant(bad); err == nil {
			t.Errorf("ParseVariant(%q) accepted", bad)
		}
	}
	// A path built from parsed values validates and round-trips.
	p := cuecast.VariantPath("payments/checkout", got)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Base() != "payments/checkout" || p.VariantLabel() != "env=prod,region=eu" {
		t.Errorf("round trip: %s %s", p.Base(), p.VariantLabel())
	}
}

// Every watcher of a plain config asks ParseVariantIndex about every
// version it applies; for a config's own content the answer must cost no
// allocation (it was one per apply, a fleet's hot path).
func TestParseVariantIndexOfConfigDoesNotAllocate(t *testing.T) {
	for _, content := range [][]byte{[]byte(`{"limit":3,"name":"checkout"}`), []byte(`{"config":"x","schema":"other"}`), nil} {
		if n := testing.AllocsPerRun(100, func() {
			if _, ok := cuecast.ParseVariantIndex(content); ok {
				t.Fatalf("%s is not a variant index", content)
			}
		}); n != 0 {
			t.Errorf("ParseVariantIndex(%s): %v allocations, want 0", content, n)
		}
	}
}
