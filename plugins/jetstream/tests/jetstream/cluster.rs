//! A three-node nats-server cluster on loopback (random ports, one storage
//! directory each, server `n<i>` tagged `az:<i>`), killed when dropped.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use orrery_testing::nats::nats_server_binary;
use orrery_testing::wait_until_async;

pub struct Cluster {
    pub urls: Vec<String>,
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    /// Starts the three and waits (bounded) until JetStream has a meta
    /// leader, i.e. answers account info.
    pub async fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let client_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let route_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let routes: Vec<String> = route_ports
            .iter()
            .map(|p| format!("\"nats://127.0.0.1:{p}\""))
            .collect();
        let mut children = Vec::new();
        for i in 0..3 {
            let store = dir.path().join(format!("n{i}"));
            let config = format!(
                "server_name: n{i}\nlisten: \"127.0.0.1:{}\"\nserver_tags: [\"az:{i}\"]\n\
                 jetstream {{ store_dir: \"{}\" }}\n\
                 cluster {{ name: c1, listen: \"127.0.0.1:{}\", routes: [{}] }}\n",
                client_ports[i],
                store.display(),
                route_ports[i],
                routes.join(", ")
            );
            let file = dir.path().join(format!("n{i}.conf"));
            std::fs::write(&file, config).unwrap();
            let child = Command::new(nats_server_binary())
                .arg("-c")
                .arg(&file)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            children.push(child);
        }
        let urls: Vec<String> = client_ports
            .iter()
            .map(|p| format!("nats://127.0.0.1:{p}"))
            .collect();
        let cluster = Cluster {
            urls,
            children,
            _dir: dir,
        };
        let url = cluster.urls[0].clone();
        wait_until_async(
            "the cluster's JetStream answers",
            Duration::from_secs(60),
            || {
                let url = url.clone();
                async move {
                    let Ok(client) = async_nats::connect(&url).await else {
                        return false;
                    };
                    async_nats::jetstream::new(client)
                        .query_account()
                        .await
                        .is_ok()
                }
            },
        )
        .await;
        cluster
    }

    pub fn url_refs(&self) -> Vec<&str> {
        self.urls.iter().map(String::as_str).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
