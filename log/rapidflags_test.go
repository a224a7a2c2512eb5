package log_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain turns rapid's fail files off unless -rapid.nofailfile is given:
// a failing property test prints its -rapid.seed instead of saving a file
// in the package's testdata, which every later run would replay (tests
// write only under t.TempDir()).
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.nofailfile" })
	if !given {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
