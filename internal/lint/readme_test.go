package lint

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeProgram is the file the README's program is a copy of.
const readmeProgram = "examples/readme/main.go"

// readmeCommands maps each command the README shows to the line of .ci/run
// that runs it; "" for the commands a test of this file runs
// (TestREADMEProgram, TestREADMESoakCommand).
var readmeCommands = map[string]string{
	"go get github.com/partlog/partlog":       "",
	"go test $(go list -m -f '{{.Dir}}/...')": "go test -count=1 $(go list -m -f '{{.Dir}}/...')",
	"go run ./examples/logbench -quick":       "go run ./examples/logbench -quick",
	readmeSoak:                                "",
}

// readmeSoak is the README's soak command (docs/crash-safety.md, "The
// soak"); readmeSoakTime is its -soak flag, which TestREADMESoakCommand
// replaces with readmeSoakShort.
const (
	readmeSoak      = "go test -race -run Soak -timeout=0 ./log -soak=10m"
	readmeSoakTime  = "-soak=10m"
	readmeSoakShort = "-soak=0s"
)

// TestREADMESoakCommand runs the README's soak command from the module root,
// with -soak=0s: each TestSoak* of package log runs its fixed rounds, with
// the race detector, as the README's command does before its extra time.
func TestREADMESoakCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds package log with the race detector and runs its soak")
	}
	require.Contains(t, readmeSoak, readmeSoakTime)
	args := strings.Fields(strings.Replace(readmeSoak, readmeSoakTime, readmeSoakShort, 1))
	require.Equal(t, "go", args[0])
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	cmd := exec.Command(goBin, args[1:]...)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s:\n%s", strings.Join(args, " "), out)
	require.Contains(t, string(out), "ok  \t"+modulePath+"/log", "%s", out)
	require.NotContains(t, string(out), "no tests to run", "%s", out)
}

// fencedBlock is one ``` block of a markdown file.
type fencedBlock struct {
	lang string
	text string
}

// fencedBlocks returns the ``` blocks of a markdown text, in order.
func fencedBlocks(md string) []fencedBlock {
	var out []fencedBlock
	var cur *fencedBlock
	for line := range strings.Lines(md) {
		trimmed := strings.TrimRight(line, "\n")
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &fencedBlock{lang: strings.TrimPrefix(trimmed, "```")}
				continue
			}
			out = append(out, *cur)
			cur = nil
			continue
		}
		if cur != nil {
			cur.text += line
		}
	}
	return out
}

// readmeParts returns the README's program, the output it shows, and its
// shell commands (comments cut).
func readmeParts(t *testing.T, md string) (program, output string, commands []string) {
	t.Helper()
	for _, b := range fencedBlocks(md) {
		switch b.lang {
		case "go":
			require.Empty(t, program, "the README has more than one go block")
			program = b.text
		case "text":
			require.Empty(t, output, "the README has more than one text block")
			output = b.text
		case "sh":
			for line := range strings.Lines(b.text) {
				cmd, _, _ := strings.Cut(line, "#")
				if cmd = strings.TrimSpace(cmd); cmd != "" {
					commands = append(commands, cmd)
				}
			}
		default:
			assert.Failf(t, "README block", "a ```%s block: the test knows go, text and sh", b.lang)
		}
	}
	inFence := false
	for line := range strings.Lines(md) {
		switch {
		case strings.HasPrefix(line, "```"):
			inFence = !inFence
		case !inFence && (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")):
			assert.Failf(t, "README indented code", "%q: put commands in a ```sh block, which this test checks", line)
		}
	}
	return program, output, commands
}

// TestREADMECommands checks that every command the README shows is run:
// by TestREADMEProgram, or by the line of .ci/run readmeCommands names.
func TestREADMECommands(t *testing.T) {
	root := moduleRoot(t)
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	require.NoError(t, err)
	_, _, commands := readmeParts(t, string(md))
	require.NotEmpty(t, commands)
	for _, cmd := range commands {
		ciLine, ok := readmeCommands[cmd]
		if !assert.True(t, ok, "README command %q: no test or CI step runs it (add it to readmeCommands and run it)", cmd) {
			continue
		}
		if ciLine != "" {
			assert.Contains(t, string(ci), ciLine, "README command %q: .ci/run does not run it", cmd)
		}
	}
	for cmd := range readmeCommands {
		assert.Contains(t, commands, cmd, "readmeCommands lists %q, which the README no longer shows", cmd)
	}
}

// TestREADMEProgram checks that the README's program is examples/readme/main.go
// byte for byte, then builds it as a user would: in a module of its own,
// with the README's go get line, offline (GOPROXY=off; a replace directive
// points at this checkout, and every dependency comes from the module cache
// the repository's own build filled, checked against the repository's
// go.sum). It runs it and compares its output with the one the README shows.
func TestREADMEProgram(t *testing.T) {
	root := moduleRoot(t)
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	program, output, _ := readmeParts(t, string(md))
	file, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(readmeProgram)))
	require.NoError(t, err)
	require.Equal(t, string(file), program, "the README's program differs from %s: change both", readmeProgram)
	require.NotEmpty(t, output, "the README shows no output of its program")
	if testing.Short() {
		t.Skip("builds a program")
	}

	dir := t.TempDir()
	gomod := "module example.com/readme\n\ngo 1.26.0\n\nreplace " + modulePath + " => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(program)} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	goBin, err := exec.LookPath("go")
	require.NoError(t, err)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s: %v\n%s", strings.Join(args, " "), err, out)
		return string(out)
	}
	get := "go get " + modulePath
	require.Contains(t, readmeCommands, get)
	run(strings.Fields(get)[1:]...)
	gomodAfter, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(gomodAfter), "require "+modulePath, "go get did not add the module")
	require.Equal(t, output, run("run", "."), "the program's output differs from the README's")
}

// markdownLink matches [text](target) and captures the target.
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingSlug is the anchor GitHub gives a markdown heading.
func headingSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// markdownAnchors returns the anchors of a markdown file's headings.
func markdownAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	inFence := false
	for line := range strings.Lines(md) {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[headingSlug(strings.TrimLeft(line, "#"))] = true
	}
	return anchors
}

// TestDocLinks checks every relative link of the repository's markdown
// files (README.md, DESIGN.md, docs/, the examples' READMEs): the file it
// names exists and, for a link to a heading (#anchor) of a markdown file,
// so does the heading.
func TestDocLinks(t *testing.T) {
	root := moduleRoot(t)
	files := []string{"README.md", "DESIGN.md"}
	for _, pattern := range []string{"docs/*.md", "examples/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pattern)))
		require.NoError(t, err)
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			require.NoError(t, err)
			files = append(files, filepath.ToSlash(rel))
		}
	}
	links := 0
	for _, file := range files {
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		require.NoError(t, err)
		for _, m := range markdownLink.FindAllStringSubmatch(string(md), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			name, anchor, _ := strings.Cut(target, "#")
			p := path.Join(path.Dir(file), name)
			if name == "" {
				p = file
			}
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				if info, serr := os.Stat(filepath.Join(root, filepath.FromSlash(p))); serr == nil && info.IsDir() && anchor == "" {
					continue
				}
				assert.Failf(t, "broken link", "%s: %s: %s does not exist", file, target, p)
				continue
			}
			if anchor != "" {
				assert.True(t, strings.HasSuffix(p, ".md") && markdownAnchors(string(data))[anchor],
					"%s: %s: %s has no heading #%s", file, target, p, anchor)
			}
		}
	}
	require.NotZero(t, links)
	t.Logf("checked %d links in %d files", links, len(files))
}
