use crate::support::*;

#[tokio::test]
async fn create_and_get_through_the_gateway() {
    let (_a, g) = single("scripts", |_| {}).await;
    let r = g.http.post_task("scripts").await;
    assert_eq!(r.status, 202, "{:?}", r);
    let t = r.json();
    assert_eq!(t["status"], "SUBMITTED");
    let id = t["task_id"].as_str().expect("id").to_owned();
    let r = g.http.get(&format!("/tasks/{id}")).await;
    assert_eq!(r.status, 200, "{:?}", r);
    assert_eq!(r.json()["task_id"], id.as_str());
}
