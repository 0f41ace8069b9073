package state

import (
	"os"
)

// copyFile copies src to dst (which must not exist) and fsyncs dst.
func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := out.ReadFrom(in); err != nil {
		return err
	}
	return out.Sync()
}
