fn main() {
    println!("orrery {}", env!("CARGO_PKG_VERSION"));
}
