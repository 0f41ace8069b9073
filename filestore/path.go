package filestore

import "strings"

// keyComponents returns the path components that store key: its segments.
// A key is stored at the relative path of the same spelling.
// key must be valid, so no component is empty, "." or "..", and none is
// longer than blobstore.MaxSegmentLen (255, the usual NAME_MAX).
func keyComponents(key string) []string {
	return strings.Split(key, "/")
}
