package ci_test

import (
	"fmt"

	"github.com/cuecast/cuecast/ci"
)

func ExampleDiff() {
	old := []byte(`{"currency":"EUR","limits":{"daily":100,"weekly":500},"providers":["stripe","adyen"]}`)
	new := []byte(`{"currency":"USD","limits":{"daily":"100"},"providers":["stripe"]}`)
	diff, err := ci.Diff(old, new)
	if err != nil {
		panic(err)
	}
	for _, d := range diff {
		fmt.Printf("%-8s %-13s %s → %s breaking=%v\n", d.Op, d.Path, d.Old, d.New, d.Breaking)
	}
	// Output:
	// changed  currency      "EUR" → "USD" breaking=false
	// type     limits.daily  100 → "100" breaking=true
	// removed  limits.weekly 500 →  breaking=true
	// removed  providers[1]  "adyen" →  breaking=false
}
