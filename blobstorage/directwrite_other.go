//go:build !linux

package blobstorage

import "os"

// openDirect returns errNoDirectIO: direct writes are used on Linux only.
func openDirect(string) (*os.File, error) { return nil, errNoDirectIO }

func clearDirect(*os.File) error { return nil }
