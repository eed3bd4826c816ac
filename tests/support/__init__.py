"""What only the tests use: the CRI client and its protos, the fake kubelet, the OCI image writer. Not installed."""
