package compiler_test

import (
	"context"
	"fmt"

	"github.com/cuecast/cuecast/compiler"
)

func Example() {
	res, err := compiler.Compile(context.Background(), "../configs-example", compiler.Options{})
	if err != nil {
		fmt.Println("cuecast failed:", err)
		return
	}
	for _, e := range res.Errors {
		fmt.Println(e)
	}
	fmt.Println("valid:", res.OK())
	fmt.Println("configs:", res.Configs)
	// Which configs must be recompiled when the shared endpoints change?
	fmt.Println("lib/net affects:", res.Index.Affected([]string{"lib/net/net.cue"}))
	fmt.Println("namespace payments is", res.Manifest.Namespaces["payments"].Consistency)
	// Output:
	// valid: true
	// configs: [growth/flags payments/checkout payments/fraud-rules payments/refunds search/indexer search/new-ui-flag search/ranking search/suggest]
	// lib/net affects: [payments/checkout payments/refunds search/indexer]
	// namespace payments is strict
}
