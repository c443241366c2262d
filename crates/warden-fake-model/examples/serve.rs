//! Serves a script by hand, for trying an agent CLI against the fake model:
//! `cargo run -p warden-fake-model --example serve -- 'shell:echo hi' 'text:done'`
//! Turns: `text:T`, `shell:CMD`, `stall`, `drop`, `status:401`. Prints the
//! URL, then each request's path as it comes.

use warden_fake_model::{FakeModel, Turn};

fn main() {
    let script = std::env::args()
        .skip(1)
        .map(|a| match a.split_once(':') {
            Some(("text", t)) => Turn::Text(t.into()),
            Some(("shell", c)) => Turn::Shell(c.into()),
            Some(("status", s)) => Turn::Status(s.parse().expect("a status code")),
            None if a == "stall" => Turn::Stall,
            None if a == "drop" => Turn::Drop,
            _ => panic!("unknown turn `{a}`"),
        })
        .collect();
    let server = FakeModel::start(script);
    println!("{}", server.url());
    let mut seen = 0;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let reqs = server.requests();
        for r in &reqs[seen..] {
            eprintln!("{} {}", r.method, r.path);
        }
        seen = reqs.len();
    }
}
