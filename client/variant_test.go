package client_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
)

// TestParseVariantIndex: the compiler's canonical index decodes; a config
// whose first key is "config", or another schema, is not an index.
func TestParseVariantIndex(t *testing.T) {
	ix, ok := cuecast.ParseVariantIndex([]byte(`{"config":"a/b","dimensions":["env"],"schema":"cuecast.variants/v1","variants":["a/b/env=prod"]}`))
	if !ok || ix.Config != "a/b" || len(ix.Variants) != 1 {
		t.Fatalf("canonical index: %+v %t", ix, ok)
	}
	for _, b := range []string{
		`{"config":"x","limit":3}`,
		`{"config":"a/b","schema":"cuecast.variants/v2","variants":[]}`,
		`{"limit":3,"schema":"cuecast.variants/v1"}`,
		``,
	} {
		if _, ok := cuecast.ParseVariantIndex([]byte(b)); ok {
			t.Errorf("%q taken for a variant index", b)
		}
	}
}

// TestPick: the variant of the values of the dimensions the config uses;
// any other case is ErrVariant, never another variant.
func TestPick(t *testing.T) {
	ix := cuecast.VariantIndex{Config: "a/b", Dimensions: []string{"env", "region"}, Schema: cuecast.VariantIndexSchema,
		Variants: []cuecast.ConfigPath{"a/b/env=prod/region=eu", "a/b/env=staging/region=eu"}}
	p, err := client.PickVariant(ix, map[string]string{"env": "prod", "region": "eu", "tier": "gold"})
	if err != nil || p != "a/b/env=prod/region=eu" {
		t.Fatalf("Pick: %s %v", p, err)
	}
	for _, dims := range []map[string]string{nil, {"env": "prod"}, {"env": "prod", "region": "us"}} {
		p, err := client.PickVariant(ix, dims)
		if !errors.Is(err, client.ErrVariant) || p != "" || !strings.Contains(err.Error(), "a/b") {
			t.Errorf("Pick(%v): %q, %v; want ErrVariant", dims, p, err)
		}
	}
}

// TestPickListsVariantsBounded: the errors list a config's variants, the
// first twelve of however many, and how to see the rest.
func TestPickListsVariantsBounded(t *testing.T) {
	ix := cuecast.VariantIndex{Config: "a/b", Dimensions: []string{"shard"}, Schema: cuecast.VariantIndexSchema}
	for i := range 30 {
		ix.Variants = append(ix.Variants, cuecast.ConfigPath(fmt.Sprintf("a/b/shard=s%02d", i)))
	}
	_, err := client.PickVariant(ix, nil)
	if err == nil || !strings.Contains(err.Error(), "its variants: shard=s00; ") || !strings.Contains(err.Error(), "shard=s11; and 18 more: cuecast status a/b") ||
		strings.Contains(err.Error(), "shard=s12") {
		t.Errorf("PickVariant without dimensions: %v", err)
	}
}
