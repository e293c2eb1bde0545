package compiler_test

import (
	"context"
	"testing"

	"github.com/cuecast/cuecast/compiler"
)

func TestExampleRepoCompiles(t *testing.T) {
	res, err := compiler.Compile(context.Background(), "../configs-example", compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Errorf("%v", e)
	}
	for cp, o := range res.Outputs {
		t.Logf("%s %s %s %v", cp, o.Checksum[:12], o.JSON, o.Files)
	}
	t.Logf("configs %v", res.Configs)
}
