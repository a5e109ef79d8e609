// Node.js HTTP without keep-alive (tests/sock_closefd.sh).  libuv closes
// sockets with syscall(SYS_close, fd), so the next connection reuses the
// number of one the preload must have seen closed.
//   node node_http.js server PORT READYFILE   serve until killed
//   node node_http.js client PORT N           N requests, one connection each
'use strict';
const http = require('http');
const fs = require('fs');
const [role, port, arg] = process.argv.slice(2);

if (role === 'server') {
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      res.setHeader('Connection', 'close');
      res.end('reply ' + req.url + ' ' + body.length);
    });
  });
  srv.keepAliveTimeout = 0;
  srv.listen(Number(port), '127.0.0.1', () => fs.writeFileSync(arg, ''));
} else {
  const n = Number(arg);
  const one = (i) => new Promise((resolve, reject) => {
    const body = 'x'.repeat(100 + i);
    const req = http.request({ host: '127.0.0.1', port: Number(port),
                               path: '/r' + i, method: 'POST', agent: false,
                               headers: { 'Content-Length': body.length } },
      (res) => {
        let got = '';
        res.setEncoding('utf8');
        res.on('data', (d) => { got += d; });
        res.on('end', () => {
          const want = 'reply /r' + i + ' ' + body.length;
          if (got !== want) reject(new Error(`request ${i}: got '${got}'`));
          else resolve();
        });
      });
    req.on('error', (e) => reject(new Error(`request ${i}: ${e.message}`)));
    req.end(body);
  });
  (async () => {
    for (let i = 0; i < n; i++) await one(i);
    console.log(`ok node client: ${n} requests, one connection each`);
  })().catch((e) => { console.log('FAIL ' + e.message); process.exit(1); });
}
