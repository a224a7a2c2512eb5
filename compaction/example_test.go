package compaction_test

import (
	"fmt"

	"github.com/partlog/partlog/compaction"
)

// Policies turns Kafka's cleanup.policy into the policies to run, in
// order.
func ExamplePolicies() {
	ps, err := compaction.Policies(compaction.Config{CleanupPolicy: "compact,delete"})
	if err != nil {
		panic(err)
	}
	for _, p := range ps {
		fmt.Println(p.Name())
	}
	_, err = compaction.Policies(compaction.Config{CleanupPolicy: "forever"})
	fmt.Println(err)
	// Output:
	// retention
	// compaction
	// partlog/compaction: invalid config: cleanup.policy "forever"
}
