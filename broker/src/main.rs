//! The `minikafka` binary (being written).
fn main() {
    println!("minikafka: broker not yet implemented");
}
