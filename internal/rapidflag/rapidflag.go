// Package rapidflag is the TestMain of the module's packages that hold
// property tests written with pgregory.net/rapid. It turns rapid's fail
// files off unless -rapid.nofailfile is given on the command line: a
// failing property test prints the -rapid.seed that replays it instead of
// saving a file in the package's testdata, which every later run would
// replay (the tests write only under t.TempDir()).
//
//	func TestMain(m *testing.M) { rapidflag.Main(m) }
package rapidflag

import (
	"flag"
	"os"
	"testing"
)

// Main parses the test flags, sets -rapid.nofailfile unless the command
// line gave it, runs the tests and exits with their status.
func Main(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.nofailfile" })
	if !given {
		if err := flag.Set("rapid.nofailfile", "true"); err != nil {
			panic(err) // rapid is not linked into this test binary
		}
	}
	os.Exit(m.Run())
}
