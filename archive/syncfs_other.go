//go:build !linux

package archive

import (
	"errors"
	"os"
)

func syncFS(*os.File) error { return errors.ErrUnsupported }

const haveSyncFS = false
