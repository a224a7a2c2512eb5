package logtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recipeFile is the recipe a program's own tests copy: its property test
// (ExampleModel_AppendBuilder) and its crash test (ExampleCrashFS).
const recipeFile = "example_recipe_test.go"

// TestRecipeFromAnotherModule copies the recipe, unchanged, into a module
// of its own that requires this one through a replace directive, and runs
// its examples there with go test, offline (GOPROXY=off: every dependency
// comes from the module cache the repository's own build filled, checked
// against the repository's go.sum). It proves that the recipe needs only
// public packages, and logs how long the 100 crash cases of ExampleCrashFS
// took on this machine (measured, not asserted: the machine's load varies).
func TestRecipeFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test of another module")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	src, err := os.ReadFile(recipeFile)
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	dir := t.TempDir()
	gomod := "module example.com/recipe\n\ngo 1.26.0\n\nrequire github.com/partlog/partlog v0.0.0\n\nreplace github.com/partlog/partlog => " + root + "\n"
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "recipe_test.go": src} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goBin, "test", "-count=1", "-run", "^Example", "-v", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	require.NoError(t, err, "go test in the other module: %v\n%s", err, out)
	for _, name := range []string{"ExampleModel_AppendBuilder", "ExampleCrashFS"} {
		m := regexp.MustCompile(`--- PASS: ` + name + ` \(([0-9.]+s)\)`).FindSubmatch(out)
		require.NotNil(t, m, "%s did not pass in the other module:\n%s", name, out)
		t.Logf("%s ran in %s in the other module", name, m[1])
	}
	require.True(t, strings.Contains(string(out), "\nok "), "go test output:\n%s", out)
	t.Logf("go test in the other module, build included: %v", wall.Round(time.Millisecond))
}
