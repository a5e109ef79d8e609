# SPDX-License-Identifier: MIT
# tests/sock/iperf_check.py — is what an iperf3 client sent what its server
# read from the fabric?  For sock_e2e, sock_dma and sock_ofi:
#   iperf_check.py CLIENT.json SERVER.json CLIENT.err SERVER.err N [RING]
# The .json files are iperf3's -J output, the .err files the two ends'
# stderr under NTBX_LOG=info (the preload's "path fabric, X bytes out, Y
# bytes in" lines); N is the client's -n; RING the receiving ring's size
# when it is larger than the 512 KiB default (a connection across hosts:
# NTBX_SOCK_XHOST_BUF), which the server may leave unread.  Prints one line;
# exit 0 if the counts agree.
#
# iperf3's server stops reading at the end of the test (a few writes in
# flight, on kernel TCP too): the preload's count of what the server read
# from the fabric lies between what iperf3 counted and what the client sent
# (plus the cookie), and the client's count of what it wrote is exact.
import json
import re
import sys

c_json, s_json, c_err, s_err, n = sys.argv[1:6]
n = int(n)
ring = int(sys.argv[6]) if len(sys.argv) > 6 else 0


def largest(path, group):
    """The largest count of the preload's 'path fabric' lines in @path."""
    pat = re.compile(r"path fabric, (\d+) bytes out(?:, (\d+) bytes in)?")
    with open(path, errors="replace") as f:
        vals = [int(m.group(group)) for m in pat.finditer(f.read())
                if m.group(group) is not None]
    return max(vals, default=0)


c = json.load(open(c_json))
s = json.load(open(s_json))
sent = c["end"]["sum_sent"]["bytes"]
rcvd = s["end"]["sum_received"]["bytes"]
srv_in, cli_out = largest(s_err, 2), largest(c_err, 1)
print("iperf3: client sent %d (the preload wrote %d), server counted %d, "
      "server read %d from the fabric, %.0f MB/s"
      % (sent, cli_out, rcvd, srv_in,
         c["end"]["sum_sent"]["bits_per_second"] / 8e6))
# the data connection also carries iperf3's 37-byte cookie, on the fabric
# unless it was written before the switch (then by TCP); -n N sends at
# least N bytes, in whole writes of 128 KiB
sys.exit(0 if n <= sent <= n + 131072 and cli_out == sent + 37 and
         rcvd <= srv_in <= sent + 37 and rcvd >= sent - 8 * 131072 - ring
         else 1)
