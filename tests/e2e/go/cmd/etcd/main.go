// Command etcd is etcd's own server (go.etcd.io/etcd/server/v3, the version
// k8s.io/kubernetes v1.35.3 requires), built from the module proxy.
//
// Debian 12's etcd-server package is 3.4.23: kube-apiserver v1.35 never gets its
// watch cache in sync with it ("Too large resource version: N, current: 1"),
// so the e2e control plane runs this build instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
