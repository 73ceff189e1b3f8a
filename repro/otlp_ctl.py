"""A hostile OTLP receiver puts terminal escapes in its status reason and Location:
export --endpoint prints them raw onto the user's terminal."""
import re, socket, subprocess, sys, threading

def serve(sock, answer):
    while True:
        c, _ = sock.accept()
        c.settimeout(5)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                data += c.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            n = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
            while len(body) < n:
                body += c.recv(65536)
        except (OSError, AttributeError):
            pass
        c.sendall(answer)
        c.close()

for answer in (b"HTTP/1.1 400 Bad\x1b]0;pwned\x07\x1b[31mRED\r\nContent-Length: 0\r\n\r\n",
               b"HTTP/1.1 302 Found\r\nLocation: http://x/\x1b[2J\xe2\x80\xae\r\nContent-Length: 0\r\n\r\n"):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(5)
    threading.Thread(target=serve, args=(s, answer), daemon=True).start()
    r = subprocess.run([sys.executable, "-m", "wp_autotrace", "export", sys.argv[1], "--format", "otlp",
                        "--endpoint", f"http://127.0.0.1:{s.getsockname()[1]}"], capture_output=True)
    print(r.returncode, r.stderr)
    print("RAW ESC" if b"\x1b" in r.stderr else "ok")
