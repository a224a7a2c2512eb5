package vfstest

import (
	"testing"

	"github.com/partlog/partlog/internal/rapidflag"
)

// TestMain turns rapid's fail files off (rapidflag.Main).
func TestMain(m *testing.M) { rapidflag.Main(m) }
