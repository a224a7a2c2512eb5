//go:build !linux

package segment

import "github.com/partlog/partlog/internal/vfs"

// reservedPastEnd reports false where the preallocation keeps no blocks
// past the length (vfs.File.Preallocate does nothing outside Linux).
func reservedPastEnd(vfs.File) bool { return false }
